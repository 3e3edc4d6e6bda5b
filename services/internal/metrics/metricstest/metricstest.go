// Package metricstest scrapes a Prometheus text exposition in tests and
// answers questions about its samples.
package metricstest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Sample is one sample line of a scrape.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Scrape holds the samples of one scrape.
type Scrape struct {
	Samples []Sample
	// Types maps each family announced by a # TYPE line to its type.
	Types map[string]string
}

// Get scrapes url (with a bearer token unless token is empty) and fails t
// unless the answer is 200 and parses.
func Get(t testing.TB, url, token string) *Scrape {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s = %d: %s", url, resp.StatusCode, b)
	}
	s, err := Parse(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return s
}

// Parse reads the Prometheus text format (version 0.0.4).
func Parse(r io.Reader) (*Scrape, error) {
	s := &Scrape{Types: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(rest)
			if len(f) == 2 {
				s.Types[f[0]] = f[1]
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		smp, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n, line, err)
		}
		s.Samples = append(s.Samples, smp)
	}
	return s, sc.Err()
}

func parseSample(line string) (Sample, error) {
	smp := Sample{Labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return smp, fmt.Errorf("no value")
	} else {
		smp.Name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for !strings.HasPrefix(rest, "}") {
			eq := strings.Index(rest, "=\"")
			if eq < 0 {
				return smp, fmt.Errorf("bad label")
			}
			name := strings.TrimLeft(rest[:eq], ", ")
			rest = rest[eq+2:]
			var val strings.Builder
			for {
				if rest == "" {
					return smp, fmt.Errorf("unterminated label value")
				}
				c := rest[0]
				rest = rest[1:]
				if c == '\\' && rest != "" {
					switch rest[0] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[0])
					}
					rest = rest[1:]
					continue
				}
				if c == '"' {
					break
				}
				val.WriteByte(c)
			}
			smp.Labels[name] = val.String()
			rest = strings.TrimPrefix(rest, ",")
		}
		rest = rest[1:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return smp, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return smp, fmt.Errorf("value: %w", err)
	}
	smp.Value = v
	return smp, nil
}

// Sum adds the values of the samples named name whose labels include
// every pair of match ("!" before a value excludes it instead), and
// reports whether there was any.
func (s *Scrape) Sum(name string, match map[string]string) (float64, bool) {
	var sum float64
	found := false
next:
	for _, smp := range s.Samples {
		if smp.Name != name {
			continue
		}
		for k, v := range match {
			if neg, ok := strings.CutPrefix(v, "!"); ok {
				if smp.Labels[k] == neg {
					continue next
				}
			} else if smp.Labels[k] != v {
				continue next
			}
		}
		sum += smp.Value
		found = true
	}
	return sum, found
}

// Names returns the sorted sample names.
func (s *Scrape) Names() []string {
	seen := map[string]bool{}
	for _, smp := range s.Samples {
		seen[smp.Name] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Families returns the families announced by # TYPE lines, sorted.
func (s *Scrape) Families() []string {
	out := make([]string, 0, len(s.Types))
	for n := range s.Types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
