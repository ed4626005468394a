package metrics_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"
	"go.yaml.in/yaml/v3"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

// repoRoot is the repository's top, from this package's directory.
const repoRoot = "../.."

// alertRules is docs/alerts.yml, as far as the test reads it.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// scrapeConfig is docs/prometheus.yml, as far as the test reads it.
type scrapeConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("error parsing %s: %v", path, err)
	}
}

// TestAlertsNameSeriesThatExist checks docs/alerts.yml against the series the code defines: each
// rocketrides_* series an alert reads exists, with the labels it matches on and, where the code
// fixes a label's values (outcomes, results, states, reasons), with those values. A renamed
// series or a mistyped value would otherwise leave an alert silent for ever.
func TestAlertsNameSeriesThatExist(t *testing.T) {
	t.Parallel()
	var rules alertRules
	readYAML(t, "docs/alerts.yml", &rules)
	defined := definedSeries(t)

	selector := regexp.MustCompile(`\b(rocketrides_[a-z_]+)(\{([^}]*)\})?`)
	matcher := regexp.MustCompile(`([a-zA-Z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	numRules := 0
	for _, group := range rules.Groups {
		for _, rule := range group.Rules {
			numRules++
			if rule.Alert == "" || rule.Expr == "" || rule.Labels["severity"] == "" ||
				rule.Annotations["summary"] == "" || rule.Annotations["description"] == "" {
				t.Errorf("rule %q: want alert, expr, a severity label, a summary and a description", rule.Alert)
			}
			uses := selector.FindAllStringSubmatch(rule.Expr, -1)
			for _, use := range uses {
				series, ok := defined.lookup(use[1])
				if !ok {
					t.Errorf("alert %s reads %s, which no code defines", rule.Alert, use[1])
					continue
				}
				for _, m := range matcher.FindAllStringSubmatch(use[3], -1) {
					label, op, value := m[1], m[2], m[3]
					if !slices.Contains(series.labels, label) {
						t.Errorf("alert %s matches %s on label %s, which it does not have (it has %v)", rule.Alert, use[1], label, series.labels)
						continue
					}
					known := series.values[label]
					if known == nil || (op != "=" && op != "=~") {
						continue // values not fixed by the code (routes, phases), or a negation
					}
					for _, v := range strings.Split(value, "|") {
						if !slices.Contains(known, v) {
							t.Errorf("alert %s matches %s{%s%s%q}, but %q is none of its values %v", rule.Alert, use[1], label, op, value, v, known)
						}
					}
				}
			}
		}
	}
	if numRules == 0 {
		t.Fatal("want alerting rules in docs/alerts.yml")
	}
}

// TestScrapeConfigCoversEveryProcess checks docs/prometheus.yml: it loads the alerts, and has one
// job per process that serves metrics (every cmd calling bootstrap.ServeMetrics), named as
// RocketRidesProcessDown expects, at the METRICS_ADDR the Procfile gives that process: foreman
// gives the Procfile's line i the PORT of .env.example plus 100 i; a background process serves
// metrics on its PORT, the API on its PORT plus apiMetricsPortOffset.
func TestScrapeConfigCoversEveryProcess(t *testing.T) {
	t.Parallel()
	const apiMetricsPortOffset = 50 // the Procfile's METRICS_ADDR=:$((PORT+50)) for the api line

	var cfg scrapeConfig
	readYAML(t, "docs/prometheus.yml", &cfg)
	if !slices.Equal(cfg.RuleFiles, []string{"alerts.yml"}) {
		t.Errorf("want rule_files [alerts.yml], got %v", cfg.RuleFiles)
	}
	targets := map[string][]string{}
	for _, sc := range cfg.ScrapeConfigs {
		process, ok := strings.CutPrefix(sc.JobName, "rocketrides-")
		if !ok {
			t.Errorf("job %q: want it named rocketrides-<process>, as RocketRidesProcessDown matches", sc.JobName)
		}
		for _, static := range sc.StaticConfigs {
			targets[process] = append(targets[process], static.Targets...)
		}
	}

	mains, err := filepath.Glob(filepath.Join(repoRoot, "cmd/*/main.go"))
	if err != nil {
		t.Fatal(err)
	}
	var serving []string
	for _, main := range mains {
		src, err := os.ReadFile(main)
		if err != nil {
			t.Fatal(err)
		}
		// A main serves its metrics itself, or through RunService.
		if strings.Contains(string(src), "bootstrap.ServeMetrics(") || strings.Contains(string(src), "bootstrap.RunService(") {
			serving = append(serving, filepath.Base(filepath.Dir(main)))
		}
	}
	if len(serving) < 5 {
		t.Fatalf("want at least the api, worker, enqueuer, completer and reaper serving metrics, found %v", serving)
	}

	basePort := envExamplePort(t)
	procfile := procfileOrder(t)
	for _, process := range serving {
		index := slices.Index(procfile, process)
		if index < 0 {
			t.Errorf("%s serves metrics but has no Procfile line", process)
			continue
		}
		port := basePort + 100*index
		if process == "api" {
			port += apiMetricsPortOffset
		}
		if want := []string{fmt.Sprintf("localhost:%d", port)}; !slices.Equal(targets[process], want) {
			t.Errorf("job rocketrides-%s: want targets %v, got %v", process, want, targets[process])
		}
		delete(targets, process)
	}
	for process := range targets {
		t.Errorf("job rocketrides-%s scrapes a process that serves no metrics", process)
	}
}

// envExamplePort is the PORT that .env.example gives the Procfile's first line.
func envExamplePort(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), "PORT="); ok {
			port, err := strconv.Atoi(value)
			if err != nil {
				t.Fatalf(".env.example: PORT=%s: %v", value, err)
			}
			return port
		}
	}
	t.Fatal(".env.example sets no PORT")
	return 0
}

// procfileOrder lists the Procfile's process types in order.
func procfileOrder(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Procfile"))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, ":")
		order = append(order, name)
	}
	return order
}

// seriesDef is a series the code defines: its label names, and the values of those labels the
// code fixes (every value exists from the start, at 0).
type seriesDef struct {
	labels []string
	values map[string][]string
}

type seriesDefs map[string]*seriesDef

// lookup finds name, or the histogram whose _bucket, _count or _sum name is.
func (d seriesDefs) lookup(name string) (*seriesDef, bool) {
	if s, ok := d[name]; ok {
		return s, true
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if s, ok := d[base]; ok {
				if suffix == "_bucket" {
					return &seriesDef{labels: append(slices.Clone(s.labels), "le"), values: s.values}, true
				}
				return s, true
			}
		}
	}
	return nil, false
}

// definedSeries builds every process's series, as the processes do, and reads back their names,
// label names (from each collector's descriptions, since a vector with no child yet gathers
// nothing) and fixed label values (from a gather). The gauges read from the database are given
// the label values their real sources return: River's states but completed, the reasons of
// abandoned requests.
func definedSeries(t *testing.T) seriesDefs {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/unused") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	reg := &recordingRegisterer{Registry: metrics.NewRegistry()}
	metrics.NewAPI(reg)
	metrics.NewPhases(reg, "started", "ride_created", "charge_created")
	metrics.NewStripe(reg)
	metrics.RegisterPool(reg, pool)
	metrics.NewEnqueuer(reg)
	metrics.RegisterStagedJobs(reg, func(context.Context) (*metrics.StagedJobs, error) { return &metrics.StagedJobs{}, nil })
	metrics.NewWorker(reg)
	metrics.RegisterRiverJobs(reg, func(context.Context) (map[string]int64, error) {
		counts := map[string]int64{}
		for _, state := range rivertype.JobStates() {
			if state != rivertype.JobStateCompleted {
				counts[string(state)] = 0
			}
		}
		return counts, nil
	})
	metrics.NewCompleter(reg)
	metrics.RegisterRequestsAwaitingReview(reg, func(context.Context) (map[string]int64, error) {
		counts := map[string]int64{}
		for _, reason := range models.AbandonedReasons {
			counts[reason] = 0
		}
		return counts, nil
	})
	metrics.NewReaper(reg)

	defs := seriesDefs{}
	descPattern := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	for _, c := range reg.collectors {
		ch := make(chan *prometheus.Desc, 100)
		c.Describe(ch)
		close(ch)
		for desc := range ch {
			m := descPattern.FindStringSubmatch(desc.String())
			if m == nil {
				t.Fatalf("cannot read the description %s", desc)
			}
			var labels []string
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			defs[m[1]] = &seriesDef{labels: labels, values: map[string][]string{}}
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range families {
		def, ok := defs[family.GetName()]
		if !ok {
			continue // go_*, process_*
		}
		for _, metric := range family.GetMetric() {
			for _, pair := range metric.GetLabel() {
				def.values[pair.GetName()] = append(def.values[pair.GetName()], pair.GetValue())
			}
		}
	}
	if len(defs) < 20 {
		t.Fatalf("want the series of every process, read %d", len(defs))
	}
	return defs
}

// recordingRegisterer registers with its Registry and remembers every collector, to describe
// them.
type recordingRegisterer struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
	r.Registry.MustRegister(cs...)
}
