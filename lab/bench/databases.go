package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/internal/authtoken"
	"github.com/rocketrides/rocketrides/migrations"
	"github.com/rocketrides/rocketrides/models"
)

// The databases, one per target.
const (
	dbArticle = "article"
	dbTwoTx   = "twotx"
	dbAPI     = "api"
)

var databaseOf = map[string]string{targetArticle: dbArticle, targetTwoTx: dbTwoTx, targetAPI: dbAPI}

// articleSchemaVersion is the last migration before 00006 made the ids of keys, rides and audit
// records random: the schema as the article has it, every id from a sequence.
const articleSchemaVersion = 5

// pgbenchTokenPrefix makes the API token of pgbench's bench rider i: the prefix and i. The
// scripts (scripts/*.sql) hash the same text to find their rider, as the API hashes a token.
const pgbenchTokenPrefix = "bench-rider-"

// standInKey is the secret key the API and the bench use with the Stripe stand-in, which takes
// any test-mode key.
const standInKey = "sk_test_rocketrides_bench"

// tokenSecret is the API_TOKEN_SECRET of the API under test and of admin, which makes its riders.
const tokenSecret = "rocketrides-bench-token-secret-not-for-production"

// prepare creates the three databases with the same history of -rides rides by -riders riders,
// and in each the -clients bench riders, client i being rider i; without article, all but the
// article's. The admin command it runs is built in workDir. It returns the API tokens of the API's bench riders, client i's at i.
func (c *benchCluster) prepare(ctx context.Context, opts *options, standIn *standIn, article bool, workDir string) ([]string, error) {
	dbnames := []string{dbAPI, dbTwoTx}
	if err := c.createSeeded(ctx, dbAPI, workDir, opts); err != nil {
		return nil, err
	}
	if c.createEmpty == nil {
		// twotx is a copy of api: the same schema, filled alike, at half the seeding time.
		if err := c.createDatabase(ctx, dbTwoTx, dbAPI); err != nil {
			return nil, err
		}
	} else if err := c.createSeeded(ctx, dbTwoTx, workDir, opts); err != nil {
		// A Citus database cannot be copied: twotx is made as api was.
		return nil, err
	}

	if article {
		dbnames = append(dbnames, dbArticle)
		if err := c.createDatabase(ctx, dbArticle, ""); err != nil {
			return nil, err
		}
		if err := migrateTo(ctx, c.url(dbArticle), articleSchemaVersion); err != nil {
			return nil, err
		}
		if err := seedHistory(ctx, workDir, c.url(dbArticle), opts); err != nil {
			return nil, err
		}
	}

	for _, dbname := range dbnames[1:] {
		if err := withConn(ctx, c.url(dbname), func(conn *pgx.Conn) error {
			return createPgbenchRiders(ctx, conn, opts.clients)
		}); err != nil {
			return nil, err
		}
	}
	tokens, err := createAPIRiders(ctx, workDir, c.url(dbAPI), opts.clients, standIn)
	if err != nil {
		return nil, err
	}

	// Fresh planner statistics, and no autovacuum of the history in the middle of a run.
	for _, dbname := range dbnames {
		if err := withConn(ctx, c.url(dbname), func(conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "VACUUM (ANALYZE)")
			return err
		}); err != nil {
			return nil, fmt.Errorf("error vacuuming %s: %w", dbname, err)
		}
	}
	return tokens, nil
}

// createSeeded creates dbname, migrates it and seeds it with the history opts ask for.
func (c *benchCluster) createSeeded(ctx context.Context, dbname, workDir string, opts *options) error {
	if err := c.createDatabase(ctx, dbname, ""); err != nil {
		return err
	}
	if err := migrations.Up(ctx, c.url(dbname)); err != nil {
		return fmt.Errorf("error migrating %s: %w", dbname, err)
	}
	if err := seedHistory(ctx, workDir, c.url(dbname), opts); err != nil {
		return fmt.Errorf("error seeding %s: %w", dbname, err)
	}
	return nil
}

// createDatabase creates dbname, as a copy of template unless that is empty. A Citus cluster
// creates only empty databases.
func (c *benchCluster) createDatabase(ctx context.Context, dbname, template string) error {
	if c.createEmpty != nil {
		if template != "" {
			return fmt.Errorf("error creating database %s: a Citus database cannot be copied from %s", dbname, template)
		}
		return c.createEmpty(ctx, dbname)
	}
	sql := "CREATE DATABASE " + pgx.Identifier{dbname}.Sanitize()
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if _, err := c.admin.Exec(ctx, sql); err != nil {
		return fmt.Errorf("error creating database %s: %w", dbname, err)
	}
	return nil
}

// migrateTo applies the migrations up to version and no further.
func migrateTo(ctx context.Context, databaseURL string, version int64) (err error) {
	db, err := migrations.Open(databaseURL)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	provider, err := migrations.NewProvider(db)
	if err != nil {
		return err
	}
	if _, err := provider.UpTo(ctx, version); err != nil {
		return fmt.Errorf("error migrating to version %d: %w", version, err)
	}
	return nil
}

// seedHistory fills a database with opts.rides rides of opts.riders riders, unless there are to
// be none, with the seed command, admin seed (built in workDir), which seeds the article's
// schema too.
func seedHistory(ctx context.Context, workDir, databaseURL string, opts *options) error {
	if opts.rides == 0 {
		return nil
	}
	_, err := runAdmin(ctx, workDir, []string{"DATABASE_URL=" + databaseURL},
		"seed", "-rides", strconv.Itoa(opts.rides), "-riders", strconv.Itoa(opts.riders))
	return err
}

// runAdmin runs the admin command built in workDir with env and args, and returns its output.
func runAdmin(ctx context.Context, workDir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(workDir, "admin"), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LOG_LEVEL=warn"}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("error running admin %s: %w: %s", args[0], err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// createPgbenchRiders creates the riders of pgbench's clients, whose tokens the scripts know.
// They need no Stripe customer, since the scripts charge nobody.
func createPgbenchRiders(ctx context.Context, db models.DBTX, clients int) error {
	for i := range clients {
		token := fmt.Sprintf("%s%d", pgbenchTokenPrefix, i)
		_, err := models.UserInsert(ctx, db, models.UserInsertParams{
			Email:            fmt.Sprintf("%s@bench.rocketrides.example", token),
			StripeCustomerID: fmt.Sprintf("cus_bench_%d", i),
			APITokenHash:     authtoken.Hash(token),
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// createAPIRiders creates the API's bench riders with admin create-user (built in workDir),
// each with a Stripe customer at the stand-in whose card works, and returns their tokens.
func createAPIRiders(ctx context.Context, workDir, databaseURL string, clients int, standIn *standIn) ([]string, error) {
	env := []string{"DATABASE_URL=" + databaseURL, "STRIPE_API_KEY=" + standInKey, "STRIPE_API_URL=" + standIn.url, "API_TOKEN_SECRET=" + tokenSecret}
	tokens := make([]string, clients)
	for i := range tokens {
		out, err := runAdmin(ctx, workDir, env, "create-user",
			"-email", fmt.Sprintf("%s%d@bench.rocketrides.example", pgbenchTokenPrefix, i), "-card", "tok_visa")
		if err != nil {
			return nil, fmt.Errorf("error creating bench rider %d: %w", i, err)
		}
		var created struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal(out, &created); err != nil || created.Token == "" {
			return nil, fmt.Errorf("error reading bench rider %d's token from %q: %v", i, out, err)
		}
		tokens[i] = created.Token
	}
	return tokens, nil
}

// history counts what each database holds before the runs.
type history struct {
	dbname        string
	rides, riders int64
}

func (c *benchCluster) history(ctx context.Context) ([]history, error) {
	var all []history
	for _, dbname := range []string{dbArticle, dbTwoTx, dbAPI} {
		h := history{dbname: dbname}
		err := withConn(ctx, c.url(dbname), func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM rides), (SELECT count(*) FROM users)").Scan(&h.rides, &h.riders)
		})
		if err != nil {
			return nil, fmt.Errorf("error counting the history of %s: %w", dbname, err)
		}
		all = append(all, h)
	}
	return all, nil
}

// withConn runs fn on a connection of its own to databaseURL.
func withConn(ctx context.Context, databaseURL string, fn func(conn *pgx.Conn) error) (err error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("error connecting: %w", err)
	}
	defer func() { err = errors.Join(err, conn.Close(context.WithoutCancel(ctx))) }()
	return fn(conn)
}
