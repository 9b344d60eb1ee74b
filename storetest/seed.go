package storetest

import (
	"crypto/rand"
	"encoding/binary"
	"os"
	"strconv"
	"testing"
)

// SeedEnv names the environment variable that replays a randomised test:
// set it to the seed a failed run logged.
const SeedEnv = "LOBBYHOST_SEED"

// Seed returns the seed a randomised test should draw its choices from, and
// logs it so that a failure can be replayed: the value of LOBBYHOST_SEED if
// it is set (a decimal uint64; anything else fails the test), else a fresh
// random one. Every test that generates traffic, schedules or data at
// random takes its seed from here, so one variable replays any of them.
// (pgregory.net/rapid prints and replays its own seeds.)
func Seed(t testing.TB) uint64 {
	t.Helper()
	if s := os.Getenv(SeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q is not a decimal uint64: %v", SeedEnv, s, err)
		}
		t.Logf("seed %d, from %s", seed, SeedEnv)
		return seed
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
	seed := binary.LittleEndian.Uint64(b[:])
	t.Logf("seed %d (replay with %s=%d)", seed, SeedEnv, seed)
	return seed
}
