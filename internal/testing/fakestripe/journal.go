package fakestripe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// journal keeps a Server's state in a file, for a stand-in that must outlive its process: a
// development database kept between runs names Stripe customers and charges, and a stand-in that
// forgot them would answer every rider's next booking with "No such customer", which the API
// stores as a final refusal. It is append-only, one JSON line per request that changed
// something, written and synced before that request is answered: a charge a client was told of
// is never forgotten, and a charge and its idempotent result are kept or lost together.
type journal struct {
	mu   sync.Mutex
	file *os.File
}

// journalEntry is one line of the journal: what one request, or one dashboard action, added.
// Customers and charges never change once made but for refunds and disputes, which replaying
// applies to their charge again, so adding is all there is to replay. Webhook events and their
// deliveries are not kept: a restarted stand-in has nothing left to deliver.
type journalEntry struct {
	Customer   *customerRecord   `json:"customer,omitempty"`
	Charge     *chargeRecord     `json:"charge,omitempty"`
	Refund     *Refund           `json:"refund,omitempty"`
	Dispute    *Dispute          `json:"dispute,omitempty"`
	Idempotent *idempotentRecord `json:"idempotent,omitempty"`
}

func (e *journalEntry) empty() bool {
	return e.Customer == nil && e.Charge == nil && e.Refund == nil && e.Dispute == nil && e.Idempotent == nil
}

type customerRecord struct {
	ID          string            `json:"id"`
	Email       string            `json:"email,omitempty"`
	Name        string            `json:"name,omitempty"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Created     time.Time         `json:"created"`
	Card        *cardRecord       `json:"card,omitempty"`
}

type cardRecord struct {
	ID       string `json:"id"`
	Customer string `json:"customer,omitempty"`
	Token    string `json:"token"` // the test token it was made from, which says how it behaves
}

type chargeRecord struct {
	Charge
	Card         cardRecord `json:"card"`
	ReceiptEmail string     `json:"receipt_email,omitempty"`
}

// idempotentRecord is a finished idempotent request. A request still executing is not
// recorded: it never finished, so a retry after a restart runs it afresh, as one after Stripe
// dropped the request would.
type idempotentRecord struct {
	Account   string          `json:"account"`
	Key       string          `json:"key"`
	Endpoint  string          `json:"endpoint"`
	Params    string          `json:"params"`
	RequestID string          `json:"request_id"`
	Status    int             `json:"status"`
	Body      json.RawMessage `json:"body"`
}

// Open returns a Server whose state is kept in the file at path: what an earlier Server kept
// there is read back, and every change from now on is added to it. A last line cut short (the
// process died while writing it) is dropped, as its request was never answered. Close the
// journal with CloseJournal once the Server has answered its last request.
func Open(path string, opts Options) (*Server, error) {
	s := New(opts)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("error reading the Stripe stand-in's journal: %w", err)
	}
	complete := data[:bytes.LastIndexByte(data, '\n')+1]
	for n, line := range bytes.Split(bytes.TrimSuffix(complete, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var entry journalEntry
		if err := json.Unmarshal(line, &entry); err != nil {
			return nil, fmt.Errorf("error reading line %d of the Stripe stand-in's journal %s: %w", n+1, path, err)
		}
		if err := s.replay(&entry); err != nil {
			return nil, fmt.Errorf("error replaying line %d of the Stripe stand-in's journal %s: %w", n+1, path, err)
		}
	}

	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("error opening the Stripe stand-in's journal: %w", err)
	}
	// One writer only: two stand-ins on one journal would write over each other's lines. The
	// lock goes with the file, when it is closed or the process dies.
	if err := syscall.Flock(int(file.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, errors.Join(fmt.Errorf("error locking the Stripe stand-in's journal %s (does another stand-in use it?): %w", path, err), file.Close())
	}
	if len(complete) < len(data) {
		s.logger.Warn("Fakestripe: dropped the journal's last line, cut short", slog.String("path", path))
	}
	// Truncating drops a cut line; the writes then go on from the end.
	if err := file.Truncate(int64(len(complete))); err != nil {
		return nil, errors.Join(fmt.Errorf("error truncating the Stripe stand-in's journal: %w", err), file.Close())
	}
	if _, err := file.Seek(0, io.SeekEnd); err != nil {
		return nil, errors.Join(fmt.Errorf("error opening the Stripe stand-in's journal: %w", err), file.Close())
	}
	s.journal = &journal{file: file}
	s.logger.Info("Fakestripe: read journal", slog.String("path", path),
		slog.Int("num_customers", len(s.customers)), slog.Int("num_charges", len(s.charges)))
	return s, nil
}

// CloseJournal closes the journal of a Server made by Open; closing it again does nothing.
// Requests that would change anything fail from then on.
func (s *Server) CloseJournal() error {
	if s.journal == nil {
		return nil
	}
	j := s.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.file == nil {
		return nil
	}
	err := j.file.Close()
	j.file = nil
	return err
}

// errJournalClosed fails a change that arrives after CloseJournal.
var errJournalClosed = errors.New("the Stripe stand-in's journal is closed")

// write adds entry to the journal and syncs it to disk.
func (j *journal) write(entry *journalEntry) error {
	line, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("error encoding journal entry: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.file == nil {
		return errJournalClosed
	}
	if _, err := j.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("error writing the Stripe stand-in's journal: %w", err)
	}
	if err := j.file.Sync(); err != nil {
		return fmt.Errorf("error syncing the Stripe stand-in's journal: %w", err)
	}
	return nil
}

// truncate empties the journal, for Reset.
func (j *journal) truncate() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.file == nil {
		return errJournalClosed
	}
	if err := j.file.Truncate(0); err != nil {
		return fmt.Errorf("error emptying the Stripe stand-in's journal: %w", err)
	}
	_, err := j.file.Seek(0, io.SeekStart)
	return err
}

// record writes what req changed, if anything, to the journal of a Server made by Open.
func (s *Server) record(req *apiRequest) error {
	return s.recordEntry(&req.changes)
}

// recordEntry writes entry, unless empty, to the journal of a Server made by Open.
func (s *Server) recordEntry(entry *journalEntry) error {
	if s.journal == nil || entry.empty() {
		return nil
	}
	return s.journal.write(entry)
}

// replay applies one journal entry to a Server being opened.
func (s *Server) replay(e *journalEntry) error {
	if c := e.Customer; c != nil {
		cus := &customer{id: c.ID, email: c.Email, name: c.Name, description: c.Description, metadata: c.Metadata, created: c.Created}
		if c.Card != nil {
			card, err := c.Card.card()
			if err != nil {
				return err
			}
			cus.card = card
		}
		s.customers[cus.id] = cus
	}
	if r := e.Charge; r != nil {
		card, err := r.Card.card()
		if err != nil {
			return err
		}
		ch := r.Charge
		ch.card, ch.receiptEmail = *card, r.ReceiptEmail
		s.charges = append(s.charges, &ch)
		s.chargesByID[ch.ID] = &ch
	}
	if r := e.Refund; r != nil {
		if s.chargesByID[r.Charge] == nil {
			return fmt.Errorf("refund %s of charge %s, which the journal does not hold", r.ID, r.Charge)
		}
		s.applyRefund(r)
	}
	if d := e.Dispute; d != nil {
		if s.chargesByID[d.Charge] == nil {
			return fmt.Errorf("dispute %s of charge %s, which the journal does not hold", d.ID, d.Charge)
		}
		s.applyDispute(d)
	}
	if r := e.Idempotent; r != nil {
		s.idempotency.requests[idempotencyScope{account: r.Account, key: r.Key}] = &idempotentRequest{
			endpoint: r.Endpoint, params: r.Params, requestID: r.RequestID, finished: true,
			result: result{status: r.Status, body: r.Body, saved: true},
		}
	}
	return nil
}

func (c *card) record() *cardRecord {
	return &cardRecord{ID: c.id, Customer: c.customer, Token: c.token}
}

func (r *cardRecord) card() (*card, error) {
	template, ok := testTokens[r.Token]
	if !ok {
		return nil, fmt.Errorf("card %s: unknown test token %q", r.ID, r.Token)
	}
	return &card{id: r.ID, customer: r.Customer, token: r.Token, cardTemplate: template}, nil
}

func (c *customer) record() *customerRecord {
	r := &customerRecord{ID: c.id, Email: c.email, Name: c.name, Description: c.description, Metadata: c.metadata, Created: c.created}
	if c.card != nil {
		r.Card = c.card.record()
	}
	return r
}

func (ch *Charge) record() *chargeRecord {
	return &chargeRecord{Charge: *ch, Card: *ch.card.record(), ReceiptEmail: ch.receiptEmail}
}
