package load

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// StoreCallsMetric is the server's counter of store calls by method.
const StoreCallsMetric = "lobbyhost_store_calls_total"

// ReadMethods are the store methods counted as reads.
var ReadMethods = []string{"Load", "ReadLog", "LogHeads"}

// StoreCalls scrapes base's /metrics and returns lobbyhost_store_calls_total
// by method. ok is false when the server does not export the counter.
func (c *Client) StoreCalls(ctx context.Context, base string) (calls map[string]float64, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false, fmt.Errorf("%s/metrics: HTTP %d", base, resp.StatusCode)
	}
	calls = map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# TYPE "+StoreCallsMetric+" ") {
			ok = true
		}
		if !strings.HasPrefix(line, StoreCallsMetric+"{") {
			continue
		}
		ok = true
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		method := labelValue(line[len(StoreCallsMetric)+1:end], "method")
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		calls[method] += v
	}
	return calls, ok, sc.Err()
}

// labelValue returns the value of name in a Prometheus label list
// (`a="x",method="Load"`).
func labelValue(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, found := strings.Cut(kv, "=")
		if found && strings.TrimSpace(k) == name {
			if s, err := strconv.Unquote(strings.TrimSpace(v)); err == nil {
				return s
			}
		}
	}
	return ""
}

// Reads sums the read methods of a scrape.
func Reads(calls map[string]float64) float64 {
	var n float64
	for _, m := range ReadMethods {
		n += calls[m]
	}
	return n
}
