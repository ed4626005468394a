package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// bannerCommand matches the first line of a command the banner gives: a curl, or a go run with
// any variables set before it.
var bannerCommand = regexp.MustCompile(`^  ((?:[A-Z_]+=\S+ )*)(curl|go run) `)

// bannerCommands lists the banner's commands in output, top to bottom, each with its
// continuation lines joined.
func bannerCommands(output string) []string {
	start := strings.Index(output, "Rocket Rides is running.")
	end := strings.Index(output, "Ctrl-C stops everything")
	if start < 0 || end < start {
		return nil
	}
	var commands []string
	lines := strings.Split(output[start:end], "\n")
	for i := 0; i < len(lines); i++ {
		if !bannerCommand.MatchString(lines[i]) {
			continue
		}
		command := strings.TrimSpace(lines[i])
		for strings.HasSuffix(command, `\`) && i+1 < len(lines) {
			i++
			command = strings.TrimSuffix(command, `\`) + " " + strings.TrimSpace(lines[i])
		}
		commands = append(commands, command)
	}
	return commands
}

// answer is what one of the banner's requests got.
type answer struct {
	status   int
	replayed bool
	body     []byte
}

// followBanner follows the banner's walkthrough top to bottom as a rider would, on the API's
// default limits: each request to the API twice, as the banner asks ("send the same command
// again"), the raise_error one the second time without it, as the banner says to resume it;
// RIDE_ID is the ride of the first booking, CHARGE_ID the charge of the last; the client runs as
// built. It fails if any of the rider's requests was refused for a limit: a 429 answered here,
// or one the client met and retried, which the API's rocketrides_rate_limited_total counts.
func followBanner(t *testing.T, output string, sh shell, rides, admin string) {
	t.Helper()
	commands := bannerCommands(output)
	if len(commands) == 0 {
		t.Fatalf("found no commands in the banner:\n%s", output)
	}
	placeholders := map[string]string{}
	var answers []answer
	for _, command := range commands {
		for name, value := range placeholders {
			command = regexp.MustCompile(`(^|[^$\w])`+name+`\b`).ReplaceAllString(command, "${1}"+value)
		}
		switch {
		case strings.HasPrefix(command, "curl "):
			// What a pipe after a curl does (jq, say) only shows its answer.
			request, _, _ := strings.Cut(command, " | ")
			args := sh.words(t, request)
			sends := 1
			if strings.Contains(command, "$API_URL") {
				sends = 2
			}
			for i := range sends {
				if i == 1 {
					args = withoutData(args, "raise_error=true")
				}
				a := curl(t, args)
				t.Logf("%s\n  -> %d (replayed %t)", command, a.status, a.replayed)
				answers = append(answers, a)
				if a.status == http.StatusCreated {
					var created struct {
						Ride struct {
							ID             string  `json:"id"`
							StripeChargeID *string `json:"stripe_charge_id"`
						} `json:"ride"`
					}
					if err := json.Unmarshal(a.body, &created); err == nil && created.Ride.ID != "" {
						if _, ok := placeholders["RIDE_ID"]; !ok {
							placeholders["RIDE_ID"] = created.Ride.ID
						}
						if created.Ride.StripeChargeID != nil {
							placeholders["CHARGE_ID"] = *created.Ride.StripeChargeID
						}
					}
				}
			}
		case strings.HasPrefix(command, "go run ./cmd/rides "):
			out, code := sh.run(t, rides+strings.TrimPrefix(command, "go run ./cmd/rides"))
			t.Logf("%s\n  -> exit %d: %s", command, code, out)
		case strings.HasPrefix(command, "go run ./cmd/admin "):
			out, code := sh.run(t, admin+strings.TrimPrefix(command, "go run ./cmd/admin"))
			t.Logf("%s\n  -> exit %d: %s", command, code, out)
		default:
			// The simulator runs until stopped, as riders of its own: no part of the rider's walk.
			t.Logf("%s\n  -> not run", command)
		}
	}

	replays := 0
	for _, a := range answers {
		if a.status == http.StatusTooManyRequests {
			t.Errorf("want no 429 on the banner's walkthrough, got: %s", a.body)
		}
		if a.replayed {
			replays++
		}
	}
	if replays == 0 {
		t.Errorf("want the walkthrough's requests sent again to be replayed, got none: %+v", answers)
	}
	m := bannerMetrics.FindAllStringSubmatch(output, -1)
	for _, match := range m {
		if match[1] != "api" {
			continue
		}
		if limited := sumSeries(proctest.Scrape(t, match[2]), "rocketrides_rate_limited_total"); limited != 0 {
			t.Errorf("want no request of the walkthrough refused for a limit, got rocketrides_rate_limited_total %v", limited)
		}
		return
	}
	t.Fatalf("the banner says nowhere where the API's metrics are:\n%s", output)
}

// words is command's words as the shell splits and expands them after the export lines.
func (sh shell) words(t *testing.T, command string) []string {
	t.Helper()
	out := sh.output(t, `set -- `+command+`; for w; do printf '%s\0' "$w"; done`)
	return strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
}

// withoutData is a curl's args without the -d that sends data.
func withoutData(args []string, data string) []string {
	var kept []string
	for i := 0; i < len(args); i++ {
		if (args[i] == "-d" || args[i] == "--data") && i+1 < len(args) && args[i+1] == data {
			i++
			continue
		}
		kept = append(kept, args[i])
	}
	return kept
}

// curl sends the request that curl would for args (the words of a curl command) and returns the
// answer.
func curl(t *testing.T, args []string) answer {
	t.Helper()
	req, err := curlRequest(args)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("curl %q: %v", args, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("curl %q: %v", args, err)
	}
	return answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true", body: b}
}

// curlRequest is the request curl would send for args, as far as the banner's curls use curl's
// options. An option it does not know is an error: the banner's requests are to be followed,
// not guessed.
func curlRequest(args []string) (*http.Request, error) {
	var (
		method, target string
		header         = http.Header{}
		data           []string
		get            bool
	)
	for i := 1; i < len(args); i++ {
		arg := args[i]
		takesValue := map[string]bool{"-X": true, "--request": true, "-H": true, "--header": true,
			"-d": true, "--data": true, "--data-raw": true, "--data-urlencode": true}[arg]
		var value string
		if takesValue {
			if i+1 == len(args) {
				return nil, fmt.Errorf("curl %s wants a value: %q", arg, args)
			}
			i++
			value = args[i]
		}
		switch arg {
		case "-i", "--include", "-s", "--silent", "-S", "--show-error", "-sS":
		case "-X", "--request":
			method = value
		case "-H", "--header":
			name, v, _ := strings.Cut(value, ":")
			header.Add(strings.TrimSpace(name), strings.TrimSpace(v))
		case "-d", "--data", "--data-raw":
			data = append(data, value)
		case "--data-urlencode":
			name, v, _ := strings.Cut(value, "=")
			data = append(data, url.QueryEscape(name)+"="+url.QueryEscape(v))
		case "-G", "--get":
			get = true
		default:
			if strings.HasPrefix(arg, "-") {
				return nil, fmt.Errorf("the banner's curl uses %s, which followBanner does not know: %q", arg, args)
			}
			target = arg
		}
	}
	var body io.Reader
	switch {
	case get && len(data) > 0:
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + strings.Join(data, "&")
	case len(data) > 0:
		body = strings.NewReader(strings.Join(data, "&"))
		header.Set("Content-Type", "application/x-www-form-urlencoded")
		if method == "" {
			method = http.MethodPost
		}
	}
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		return nil, fmt.Errorf("curl %q: %w", args, err)
	}
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		return nil, fmt.Errorf("curl %q: want an http URL, got %q", args, target)
	}
	req.Header = header
	return req, nil
}

// TestBannerRequestsAreFollowed renders the banner and checks that followBanner finds its
// requests and can send each one as curl would, so that a banner line it could not follow
// shows here in a second rather than in TestDev's minutes.
func TestBannerRequestsAreFollowed(t *testing.T) {
	t.Parallel()
	rider := &supervisor.Rider{Email: "rider@rocketrides.example", Token: "rr_rider"}
	text := banner(bannerData{
		APIURL: "http://127.0.0.1:5004", DatabaseURL: "postgres://127.0.0.1:5605/rocketrides", StripeAPIKey: "sk_test_x",
		TokenSecret: "secret", StripeURL: "http://127.0.0.1:5704", Rider: rider, Declined: rider,
		Metrics: []metricsEndpoint{{Name: "api", URL: "http://127.0.0.1:5054/metrics"}},
	})
	sh := bannerShell(t, text)
	var curls int
	for _, command := range bannerCommands(text) {
		if !strings.HasPrefix(command, "curl ") {
			continue
		}
		curls++
		request, _, _ := strings.Cut(command, " | ")
		if _, err := curlRequest(sh.words(t, request)); err != nil {
			t.Errorf("%s: %v", command, err)
		}
	}
	if curls == 0 {
		t.Fatalf("found no curl in the banner:\n%s", text)
	}
}

// sumSeries is the sum of every series of metric in a scrape, whatever its labels; 0 if it has
// none.
func sumSeries(text, metric string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
