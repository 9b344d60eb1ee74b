package redisstore_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
	"github.com/lobbyhost/lobbyhost/storetest"
)

// freeClusterPort returns a free port p whose cluster bus port p+10000 is
// free too.
func freeClusterPort(t *testing.T) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		l.Close()
		if err == nil {
			bus.Close()
			return p
		}
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}

// startCluster starts a Redis Cluster of three primaries on loopback, owned
// by the test, and returns a client for it.
func startCluster(t *testing.T) rueidis.Client {
	t.Helper()
	sharedClient(t) // the same switch as every other Redis test
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		unavailable(t, "redis-cli is not on PATH")
	}
	var addrs []string
	for range 3 {
		port := freeClusterPort(t)
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			unavailable(t, "redis-server is not on PATH")
		}
		srv := &server{t: t, bin: bin, port: port, args: []string{
			"--appendonly", "no", "--cluster-enabled", "yes", "--dir", t.TempDir(),
			"--cluster-config-file", "nodes.conf",
		}}
		srv.start()
		t.Cleanup(srv.kill)
		addrs = append(addrs, srv.addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Wait, bounded, until every node sees every slot served.
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs {
		host, port, _ := strings.Cut(a, ":")
		for {
			out, _ := exec.Command(cli, "-h", host, "-p", port, "CLUSTER", "INFO").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s not ready after 20s:\n%s", a, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("connecting to the cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestCluster runs the conformance suite, and this package's log and
// WriteBatch tests, against a three-node Redis Cluster with the lobbies
// spread over shards in different slots: every script must touch one slot only, and Due, Claim,
// TrimLog, ClaimLog, LogHeads, the floor's copies and Subscribe must work
// across nodes.
func TestCluster(t *testing.T) {
	c := startCluster(t)
	n := 0
	newClusterStore := func(t *testing.T, opts ...redisstore.Option) *redisstore.Store {
		n++
		opts = append([]redisstore.Option{redisstore.WithPrefix("ct" + strconv.Itoa(n)), redisstore.WithShards(6)}, opts...)
		s, err := redisstore.New(c, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.RunWith(t,
		func(t *testing.T) store.Store { return newClusterStore(t) },
		storetest.Options{
			NewRetained: func(t *testing.T, r store.Retention) store.Store {
				return newClusterStore(t, redisstore.WithRetention(r))
			},
			// Shards on several nodes: ClaimLog claims them one by one.
			PartitionedClaims: true,
		})
	t.Run("Log", func(t *testing.T) {
		for _, lc := range logCases {
			t.Run(lc.name, func(t *testing.T) { lc.f(t, newClusterStore) })
		}
	})
	t.Run("WriteBatch", func(t *testing.T) {
		for _, bc := range batchCases {
			t.Run(bc.name, func(t *testing.T) { bc.f(t, newClusterStore) })
		}
	})

	// The shards must have landed on more than one node, or the suite
	// proved nothing about crossing nodes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	used := 0
	for addr, node := range c.Nodes() {
		size, err := node.Do(ctx, node.B().Dbsize().Build()).AsInt64()
		if err != nil {
			t.Fatalf("DBSIZE on %s: %v", addr, err)
		}
		if size > 0 {
			used++
		}
	}
	if used < 2 {
		t.Errorf("the suite's keys are on %d node(s), want several", used)
	}
}
