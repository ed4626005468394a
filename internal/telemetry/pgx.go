package telemetry

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The attributes of a statement's span, OpenTelemetry's names for them.
const (
	dbSystem    = attribute.Key("db.system.name")
	dbQueryText = attribute.Key("db.query.text")
	dbBatchSize = attribute.Key("db.operation.batch.size")
)

// PgxTracer returns a pgx tracer that makes a client span of every statement and batch a pool
// sends, inside the span of whatever sent it (an atomic phase, a job), when tracing is on; nil
// otherwise, which pgx takes as no tracer. A span holds the statement's text, never its
// arguments: they hold riders' data and tokens' hashes.
func PgxTracer() pgx.QueryTracer {
	if !Enabled() {
		return nil
	}
	return newPgxTracer(otel.GetTracerProvider())
}

func newPgxTracer(provider trace.TracerProvider) *pgxTracer {
	return &pgxTracer{tracer: provider.Tracer("github.com/rocketrides/rocketrides/internal/telemetry")}
}

type pgxTracer struct {
	tracer trace.Tracer
}

var (
	_ pgx.QueryTracer = (*pgxTracer)(nil)
	_ pgx.BatchTracer = (*pgxTracer)(nil)
)

// statementName names a statement's span for its first keyword (SELECT, INSERT, COMMIT...),
// past the comment lines that lead some statements: the text itself is an attribute, too long
// and too varied for a name.
func statementName(sql string) string {
	sql = strings.TrimSpace(sql)
	for strings.HasPrefix(sql, "--") {
		_, rest, _ := strings.Cut(sql, "\n")
		sql = strings.TrimSpace(rest)
	}
	if i := strings.IndexAny(sql, " \n\t("); i > 0 {
		sql = sql[:i]
	}
	return "postgres " + strings.ToUpper(sql)
}

func (t *pgxTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	ctx, _ = t.tracer.Start(ctx, statementName(data.SQL), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(dbSystem.String("postgresql"), dbQueryText.String(data.SQL)))
	return ctx
}

func (t *pgxTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	endWith(trace.SpanFromContext(ctx), data.Err)
}

func (t *pgxTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	size := 0
	if data.Batch != nil {
		size = data.Batch.Len()
	}
	ctx, _ = t.tracer.Start(ctx, "postgres batch", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(dbSystem.String("postgresql"), dbBatchSize.Int(size)))
	return ctx
}

// TraceBatchQuery records each statement of a batch as an event of the batch's span: they go
// to Postgres in one round trip, so they have no times of their own to show.
func (t *pgxTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	span := trace.SpanFromContext(ctx)
	attrs := []attribute.KeyValue{dbQueryText.String(data.SQL)}
	if data.Err != nil {
		attrs = append(attrs, attribute.String("error", data.Err.Error()))
	}
	span.AddEvent("statement", trace.WithAttributes(attrs...))
}

func (t *pgxTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	endWith(trace.SpanFromContext(ctx), data.Err)
}

func endWith(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
