import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // The unit tests run on a fake clock and a fake socket: nothing waits on
    // real time, so a short timeout catches a test that hangs.
    testTimeout: 5000,
    // The tests against the real server need a WebSocket in Node, which
    // Node 20 has behind a flag (Node 22 has it by default).
    execArgv: typeof (globalThis as { WebSocket?: unknown }).WebSocket === 'undefined' ? ['--experimental-websocket'] : [],
  },
});
