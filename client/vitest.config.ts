import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // The tests run on a fake clock and a fake socket: nothing waits on
    // real time, so a short timeout catches a test that hangs.
    testTimeout: 5000,
    reporters: ['default'],
  },
});
