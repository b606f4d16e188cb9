package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ErrNoSample is returned by Scrape when /metrics lacks the sample.
var ErrNoSample = errors.New("no such sample")

// scrapeTimeout bounds one /metrics request.
const scrapeTimeout = 2 * time.Second

// Metrics returns the text of http://addr/metrics.
func Metrics(ctx context.Context, addr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: status %d", addr, resp.StatusCode)
	}
	return body, nil
}

// Scrape returns the value of one sample of addr's /metrics: the line that
// reads exactly sample (a name with its labels, as exposed), a space and the
// value. ErrNoSample, wrapped, means the server answered without that line.
func Scrape(ctx context.Context, addr, sample string) (float64, error) {
	body, err := Metrics(ctx, addr)
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0, fmt.Errorf("%s on %s: %w", sample, addr, ErrNoSample)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, fmt.Errorf("%s on %s: %w", sample, addr, err)
	}
	return v, nil
}

// ScrapeSum sums the values of every sample line of addr's /metrics that
// starts with prefix (a metric name, or a name and the first labels, such as
// `burnpoller_rpc_requests_total{method="eth_getLogs"`). No such line sums
// to 0.
func ScrapeSum(ctx context.Context, addr, prefix string) (float64, error) {
	body, err := Metrics(ctx, addr)
	if err != nil {
		return 0, err
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%q on %s: %w", line, addr, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// ScrapeBy sums the samples of metric on addr's /metrics by the value of
// one of their labels: for burnpoller_rpc_requests_total and "method", the
// calls of each method whatever their result. A sample without the label
// counts under "". No sample gives an empty map.
func ScrapeBy(ctx context.Context, addr, metric, label string) (map[string]float64, error) {
	body, err := Metrics(ctx, addr)
	if err != nil {
		return nil, err
	}
	labelRE := regexp.MustCompile(`[{,]` + regexp.QuoteMeta(label) + `="((?:[^"\\]|\\.)*)"`)
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("%q on %s: %w", line, addr, err)
		}
		key := ""
		if m := labelRE.FindStringSubmatch(rest); m != nil {
			key = m[1]
		}
		out[key] += v
	}
	return out, sc.Err()
}
