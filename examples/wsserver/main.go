// Command wsserver is lobbyhost's WebSocket lobby server: an HTTP API that
// issues socket tickets, a WebSocket endpoint that keeps every member of a
// room informed of who is in it and who hosts it, and a browser page to try
// it.
//
//	go run ./examples/wsserver            # then open the printed URL
//	export LOBBYHOST_TICKET_KEYS=$(openssl rand -hex 32)  # the same on every process
//	go run ./examples/wsserver -store postgres -postgres-dsn postgres://...
//	go run ./examples/wsserver -store redis -redis-addr 127.0.0.1:6379
//
// The page signs users in with a DEMO authenticator that believes the
// x-authenticated-user header. See docs/wsserver.md for the protocol.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
	"github.com/lobbyhost/lobbyhost/store/pgxstore"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "wsserver:", err)
		os.Exit(1)
	}
}

// options are the command line, after flags and environment.
type options struct {
	addr           string
	storeKind      string
	postgresDSN    string
	postgresSchema string
	redisAddr      string
	redisPrefix    string
	grace          time.Duration
	heartbeatTTL   time.Duration
	ticketTTL      time.Duration
	ticketKeys     string
	maxMembers     int
	maxTabs        int
	metricsHosts   string
	origins        string
	pseudonymKey   string
	logFormat      string
	logLevel       string
	shutdownWait   time.Duration
	pprofAddr      string
	clockOffset    time.Duration
}

func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (options, error) {
	envOr := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	durationEnv := func(k string, def time.Duration) (time.Duration, error) {
		v := getenv(k)
		if v == "" {
			return def, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", k, err)
		}
		return d, nil
	}
	def := lobby.DefaultPolicy()
	var o options
	grace, err := durationEnv("LOBBYHOST_GRACE", def.Grace)
	if err != nil {
		return o, err
	}
	ttl, err := durationEnv("LOBBYHOST_HEARTBEAT_TTL", def.HeartbeatTTL)
	if err != nil {
		return o, err
	}
	fs := flag.NewFlagSet("wsserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", envOr("LOBBYHOST_ADDR", "127.0.0.1:8080"), "listen address (env LOBBYHOST_ADDR)")
	fs.StringVar(&o.storeKind, "store", envOr("LOBBYHOST_STORE", "memory"), "lobby store: memory, postgres or redis (env LOBBYHOST_STORE)")
	fs.StringVar(&o.postgresDSN, "postgres-dsn", getenv("LOBBYHOST_POSTGRES_DSN"), "PostgreSQL connection string for -store postgres (env LOBBYHOST_POSTGRES_DSN)")
	fs.StringVar(&o.postgresSchema, "postgres-schema", pgxstore.DefaultSchema, "PostgreSQL schema for -store postgres (created if missing)")
	fs.StringVar(&o.redisAddr, "redis-addr", getenv("LOBBYHOST_REDIS_ADDR"), "Redis host:port for -store redis (env LOBBYHOST_REDIS_ADDR)")
	fs.StringVar(&o.redisPrefix, "redis-prefix", redisstore.DefaultPrefix, "Redis key prefix for -store redis")
	fs.DurationVar(&o.grace, "grace", grace, "how long a dropped player keeps its place (and the host role) to reconnect (env LOBBYHOST_GRACE)")
	fs.DurationVar(&o.heartbeatTTL, "heartbeat-ttl", ttl, "a socket that shows no sign of life for this long is ended; 0: only closes end sockets (env LOBBYHOST_HEARTBEAT_TTL)")
	fs.DurationVar(&o.ticketTTL, "ticket-ttl", server.DefaultTicketTTL, "lifetime of a socket ticket")
	fs.StringVar(&o.ticketKeys, "ticket-keys", getenv("LOBBYHOST_TICKET_KEYS"), "comma-separated hex keys (each at least 32 bytes) that sign socket tickets, so that every process sharing them accepts them; the first signs, any verifies (rotation). Required with -store postgres or redis (env LOBBYHOST_TICKET_KEYS)")
	fs.IntVar(&o.maxMembers, "max-members", server.DefaultMaxMembers, "most members per lobby, reconnecting ones included")
	fs.IntVar(&o.maxTabs, "max-tabs", server.DefaultMaxTabs, "most sockets per player; more end the oldest (0: no cap)")
	fs.StringVar(&o.metricsHosts, "metrics-hosts", "", "comma-separated host names or addresses, besides loopback ones and the listen address, for which /metrics answers")
	fs.StringVar(&o.origins, "allow-origins", "", "comma-separated browser origins (scheme://host[:port], wildcards allowed) that may use the API; default: the listen address, over http and https")
	fs.StringVar(&o.pseudonymKey, "pseudonym-key", getenv("LOBBYHOST_PSEUDONYM_KEY"), "hex key (at least 16 bytes) for player pseudonyms in logs; random if empty (env LOBBYHOST_PSEUDONYM_KEY)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&o.shutdownWait, "shutdown-wait", 10*time.Second, "how long shutdown waits for sockets to close")
	fs.StringVar(&o.pprofAddr, "pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060) for profiling; off if empty. Never expose it")
	fs.DurationVar(&o.clockOffset, "test-clock-offset", 0, "FOR FAULT TESTING ONLY: run this process's clock ahead (e.g. 500ms) or behind (-500ms) of the machine's, to test clock skew between processes; never set it in production")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return o, nil
}

func newLogger(o options, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch o.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("-log-format must be text or json, not %q", o.logFormat)
}

// defaultPoolConns is the PostgreSQL pool size unless the DSN sets
// pool_max_conns.
const defaultPoolConns = 16

// openStore returns the store named by the options and a function that
// releases it.
//
// Its Redemptions records redeemed signed tickets in the same place, so
// that every process on the store sees them.
func openStore(ctx context.Context, o options) (store.Store, server.Redemptions, func(), error) {
	switch o.storeKind {
	case "memory":
		return memstore.New(), server.NewMemoryRedemptions(), func() {}, nil
	case "postgres":
		if o.postgresDSN == "" {
			return nil, nil, nil, errors.New("-store postgres needs -postgres-dsn or LOBBYHOST_POSTGRES_DSN")
		}
		cfg, err := pgxpool.ParseConfig(o.postgresDSN)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("postgres: %w", err)
		}
		if !strings.Contains(o.postgresDSN, "pool_max_conns") {
			// pgxpool's default (4 on this kind of machine) queues a
			// burst of joins behind each other; the DSN may set its own.
			cfg.MaxConns = defaultPoolConns
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("postgres: %w", err)
		}
		st, err := pgxstore.New(pool, pgxstore.WithSchema(o.postgresSchema))
		if err == nil {
			err = st.Migrate(ctx)
		}
		var used *server.PostgresRedemptions
		if err == nil {
			used, err = server.NewPostgresRedemptions(ctx, pool, o.postgresSchema)
		}
		if err != nil {
			pool.Close()
			return nil, nil, nil, fmt.Errorf("postgres: %w", err)
		}
		return st, used, pool.Close, nil
	case "redis":
		if o.redisAddr == "" {
			return nil, nil, nil, errors.New("-store redis needs -redis-addr or LOBBYHOST_REDIS_ADDR")
		}
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{o.redisAddr}, DisableCache: true})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("redis: %w", err)
		}
		st, err := redisstore.New(c, redisstore.WithPrefix(o.redisPrefix))
		var used *server.RedisRedemptions
		if err == nil {
			used, err = server.NewRedisRedemptions(c, o.redisPrefix)
		}
		if err != nil {
			c.Close()
			return nil, nil, nil, fmt.Errorf("redis: %w", err)
		}
		return st, used, c.Close, nil
	}
	return nil, nil, nil, fmt.Errorf("-store must be memory, postgres or redis, not %q", o.storeKind)
}

// run serves until ctx is done, then shuts down gracefully. It prints the
// page's URL to stdout once it listens.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	o, err := parseFlags(args, stderr, getenv)
	if err != nil {
		return err
	}
	logger, err := newLogger(o, stderr)
	if err != nil {
		return err
	}
	var key []byte
	if o.pseudonymKey != "" {
		if key, err = hex.DecodeString(o.pseudonymKey); err != nil || len(key) < 16 {
			return errors.New("-pseudonym-key must be at least 16 bytes, hex-encoded")
		}
	}
	policy := lobby.DefaultPolicy()
	policy.Grace = o.grace
	policy.HeartbeatTTL = o.heartbeatTTL
	policy.MaxMembers = o.maxMembers
	policy.MaxConnectionsPerPlayer = o.maxTabs
	if err := policy.Validate(); err != nil {
		return err
	}

	keys, err := parseTicketKeys(o.ticketKeys)
	if err != nil {
		return err
	}
	shared := o.storeKind != "memory"
	if shared && len(keys) == 0 {
		// Behind a load balancer the ticket request and the upgrade can
		// reach different processes; tickets only one process knows would
		// then fail at random. Refusing to start says so at once.
		return errors.New("-store " + o.storeKind + " needs -ticket-keys or LOBBYHOST_TICKET_KEYS " +
			"(the same hex key, at least 32 bytes, on every process; e.g. openssl rand -hex 32), " +
			"so that any process accepts a ticket another issued")
	}
	st, used, release, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer release()
	clock := newOffsetClock(clockwork.NewRealClock(), o.clockOffset)
	if o.clockOffset != 0 {
		logger.Warn("test clock offset in force: this process's clock is shifted, for fault testing only", "offset", o.clockOffset)
	}
	var tickets server.Tickets // nil: the server's per-process MemoryTickets
	if len(keys) > 0 {
		if tickets, err = server.NewSignedTickets(keys, clock, o.ticketTTL, used); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	origins := listenOrigins(ln.Addr())
	if o.origins != "" {
		origins = nil
		for _, p := range strings.Split(o.origins, ",") {
			if p = strings.TrimSpace(p); p != "" {
				origins = append(origins, p)
			}
		}
	}
	metricsHosts := listenHosts(ln.Addr())
	for _, h := range strings.Split(o.metricsHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			metricsHosts = append(metricsHosts, h)
		}
	}
	srv, err := server.New(server.Config{
		Store:          st,
		Clock:          clock,
		Policy:         policy,
		Authenticator:  server.HeaderAuthenticator{},
		Logger:         logger,
		PseudonymKey:   key,
		TicketTTL:      o.ticketTTL,
		Tickets:        tickets,
		AllowedOrigins: origins,
		MetricsHosts:   metricsHosts,
	})
	if err != nil {
		return err
	}
	hs := srv.HTTPServer()
	if o.pprofAddr != "" {
		stopPprof, err := servePprof(o.pprofAddr, logger)
		if err != nil {
			return err
		}
		defer stopPprof()
	}

	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(runCtx) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	logger.Warn("DEMO AUTHENTICATION: the ticket endpoint believes the " + server.DemoUserHeader +
		" header, so anybody can act as anybody. Put real authentication in front before exposing this server.")
	logger.Info("serving", "addr", ln.Addr().String(), "origins", strings.Join(origins, ","), "store", o.storeKind,
		"grace", policy.Grace, "heartbeat_ttl", policy.HeartbeatTTL, "shared_store", shared, "signed_tickets", len(keys) > 0)
	fmt.Fprintf(stdout, "lobbyhost wsserver: open http://%s/ (demo sign-in; Ctrl-C to stop)\n", ln.Addr())

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return err
	case err := <-runErr:
		hs.Close()
		return err
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownWait)
	defer cancel()
	// Closing the listener first, then the sockets (each reported closed
	// to the lobby, so players can reconnect elsewhere within the grace),
	// then the background work.
	herr := hs.Shutdown(sctx)
	serr := srv.Shutdown(sctx)
	stopRun()
	if err := <-runErr; err != nil {
		return err
	}
	return errors.Join(herr, serr)
}

// parseTicketKeys decodes -ticket-keys: comma-separated hex keys of at
// least server.MinTicketKeyBytes each. Empty means no key.
func parseTicketKeys(v string) ([][]byte, error) {
	var keys [][]byte
	for i, h := range strings.Split(v, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		k, err := hex.DecodeString(h)
		if err != nil || len(k) < server.MinTicketKeyBytes {
			return nil, fmt.Errorf("-ticket-keys: key %d must be at least %d bytes, hex-encoded", i+1, server.MinTicketKeyBytes)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// servePprof serves the runtime profiles of net/http/pprof on addr, on a
// listener and mux of their own (never on the public handler), and returns
// a function that stops it.
func servePprof(addr string, logger *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-pprof: %w", err)
	}
	// The block and mutex profiles record nothing unless asked to.
	runtime.SetBlockProfileRate(int(time.Millisecond))
	runtime.SetMutexProfileFraction(10)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	logger.Warn("profiling endpoint enabled: it exposes the process's internals; keep it private", "addr", ln.Addr().String())
	return func() { _ = hs.Close() }, nil
}

// listenHosts returns the host of a listen address, for /metrics: a
// scraper that reaches the server at that address sends it as Host. An
// unspecified host adds nothing (loopback names are always allowed).
func listenHosts(addr net.Addr) []string {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil || host == "" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return nil
	}
	return []string{host}
}

// listenOrigins returns the browser origins of a listen address, over http
// and https (TLS may be terminated in front of the server). An unspecified
// host (":8080", "0.0.0.0:8080") is spelled as the loopback names a local
// browser uses; anything else needs -allow-origins.
func listenOrigins(addr net.Addr) []string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return nil
	}
	hosts := []string{host}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		hosts = []string{"localhost", "127.0.0.1", "[::1]"}
	} else if ip != nil && ip.To4() == nil {
		hosts = []string{"[" + host + "]"}
	}
	var out []string
	for _, scheme := range []string{"http", "https"} {
		for _, h := range hosts {
			out = append(out, scheme+"://"+h+":"+port)
		}
	}
	return out
}
