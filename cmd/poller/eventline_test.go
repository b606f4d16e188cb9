package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// maxUint256 is the largest amount a burn can have.
const maxUint256 = "115792089237316195423570985008687907853269984665640564039457584007913129639935"

var (
	linePayer = "0x3f1c" + strings.Repeat("0", 32) + "a2e1"
	lineTx    = "0x9a4b" + strings.Repeat("5", 56) + "07c2"
)

func amountOf(t *testing.T, s string) *big.Int {
	t.Helper()
	a, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("amount %q", s)
	}
	return a
}

// TestEventLineFitsATerminal: one line per event, in 80 characters for
// realistic values, whatever the amount.
func TestEventLineFitsATerminal(t *testing.T) {
	now := time.Date(2025, 3, 4, 15, 0, 0, 0, time.UTC)
	today := time.Date(2025, 3, 4, 14, 3, 7, 0, time.UTC)
	head := map[uint64]int64{1: 21_000_012} // block 21000000 has 13 confirmations
	for _, tt := range []struct {
		name   string
		seq    int64
		kind   string
		amount string // "" for none
		at     time.Time
		heads  map[uint64]int64
		reason string
		want   string
	}{
		{"confirmations", 812, payments.KindConfirmed, "1000000000000000000", today, head, "",
			"14:03:07 #812 confirmed 1e18 0x3f1c…a2e1 0x9a4b…07c2 @21000000 13 conf"},
		{"no head recorded: no confirmations", 812, payments.KindSeen, "1000000000000000000", today, nil, "",
			"14:03:07 #812 seen      1e18 0x3f1c…a2e1 0x9a4b…07c2 @21000000"},
		{"yesterday: the date", 811, payments.KindSeen, "1500000000000000000", time.Date(2025, 3, 3, 23, 59, 59, 0, time.UTC), head, "",
			"2025-03-03 #811 seen      1.5e18 0x3f1c…a2e1 0x9a4b…07c2 @21000000 13 conf"},
		{"a year ago to the day: the date", 7, payments.KindConfirmed, "1500000000000000000", time.Date(2024, 3, 4, 14, 3, 7, 0, time.UTC), head, "",
			"2024-03-04 #7 confirmed 1.5e18 0x3f1c…a2e1 0x9a4b…07c2 @21000000 13 conf"},
		{"deep: confirmations capped", 99_999, payments.KindConfirmed, "1500000000000000000", today.AddDate(0, 0, -30),
			map[uint64]int64{1: 23_000_000}, "",
			"2025-02-02 #99999 confirmed 1.5e18 0x3f1c…a2e1 0x9a4b…07c2 @21000000 9999+ conf"},
		{"max uint256, another day, deep", 812, payments.KindConfirmed, maxUint256, today.AddDate(0, 0, -30),
			map[uint64]int64{1: 23_000_000}, "",
			"2025-02-02 #812 confirmed 1.157…e77 0x3f1c…a2e1 0x9a4b…07c2 @21000000 9999+ conf"},
		{"small amount", 812, payments.KindConfirmed, "5", today, head, "",
			"14:03:07 #812 confirmed 5 0x3f1c…a2e1 0x9a4b…07c2 @21000000 13 conf"},
		{"zero", 812, payments.KindConfirmed, "0", today, head, "",
			"14:03:07 #812 confirmed 0 0x3f1c…a2e1 0x9a4b…07c2 @21000000 13 conf"},
		{"nine digits in full", 812, payments.KindConfirmed, "123456789", today, head, "",
			"14:03:07 #812 confirmed 123456789 0x3f1c…a2e1 0x9a4b…07c2 @21000000 13 conf"},
		{"every significant digit", 812, payments.KindConfirmed, "1234500000000000000", today, head, "",
			"14:03:07 #812 confirmed 1.2345e18 0x3f1c…a2e1 0x9a4b…07c2 @21000000 13 conf"},
		{"leading digits and the exponent", 812, payments.KindConfirmed, "1234567891", today, head, "",
			"14:03:07 #812 confirmed 1.2345…e9 0x3f1c…a2e1 0x9a4b…07c2 @21000000 13 conf"},
		{"no amount", 812, payments.KindSeen, "", today, head, "",
			"14:03:07 #812 seen      - 0x3f1c…a2e1 0x9a4b…07c2 @21000000 13 conf"},
		{"retracted: a short reason in full, no confirmations", 813, payments.KindRetracted, "1000000000000000000", today, head, "reorg",
			"14:03:07 #813 retracted 1e18 0x3f1c…a2e1 0x9a4b…07c2 @21000000 (reorg)"},
		{"retracted: a long reason cut to fit", 813, payments.KindRetracted, "1000000000000000000", today, head,
			"contract no longer followed by its group",
			"14:03:07 #813 retracted 1e18 0x3f1c…a2e1 0x9a4b…07c2 @21000000 (contract no lo…)"},
		{"retracted another day, max uint256: the reason still shows it is cut", 813, payments.KindRetracted, maxUint256,
			today.AddDate(-1, 0, 0), head, "contract no longer followed by its group",
			"2024-03-04 #813 retracted 1.157…e77 0x3f1c…a2e1 0x9a4b…07c2 @21000000 (contrac…)"},
		{"no room for the reason: an ellipsis says there is one", 1_234_567_890, payments.KindRetracted, maxUint256,
			today.AddDate(-1, 0, 0), head, "contract no longer followed by its group",
			"2024-03-04 #1234567890 retracted 1.157…e77 0x3f1c…a2e1 0x9a4b…07c2 @21000000 (…)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := payments.Event{Seq: tt.seq, Kind: tt.kind, ChainID: 1, TxHash: lineTx, LogIndex: 3, BlockNumber: 21_000_000,
				Payer: linePayer, CreatedAt: tt.at, Reason: tt.reason}
			if tt.amount != "" {
				e.Amount = amountOf(t, tt.amount)
			}
			got := eventLine(e, tt.heads, now)
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if n := utf8.RuneCountInString(got); n > lineWidth {
				t.Errorf("%d characters, more than %d: %q", n, lineWidth, got)
			}
		})
	}
}

// TestShortAmountIsExactOrSaysSo: a shortened amount is either the amount
// exactly (in full or in scientific notation with every significant digit)
// or says it left digits out, and then shows the amount's own leading
// digits and its exact exponent: never a different amount.
func TestShortAmountIsExactOrSaysSo(t *testing.T) {
	for _, s := range []string{"0", "5", "999999999", "1000000000", "1234567891", "1000000000000000000",
		"1500000000000000000", "1234500000000000000", "1234560000000000000", "1000000000000000001",
		"100000000000000000000000000000000000000000000000000000000000000000000000000000", maxUint256} {
		got := shortAmount(s)
		if n := utf8.RuneCountInString(got); n > amountWidth {
			t.Errorf("%s: %q has %d characters, more than %d", s, got, n, amountWidth)
		}
		mantissa, exp, sci := strings.Cut(got, "e")
		if !sci {
			if got != s {
				t.Errorf("%s: %q", s, got)
			}
			continue
		}
		e, err := strconv.Atoi(exp)
		if err != nil || e != len(s)-1 {
			t.Errorf("%s: %q has exponent %q, want %d", s, got, exp, len(s)-1)
		}
		digits, cut := strings.CutSuffix(strings.Replace(mantissa, ".", "", 1), "…")
		switch {
		case !strings.HasPrefix(s, digits):
			t.Errorf("%s: %q shows digits %s the amount does not start with", s, got, digits)
		case !cut && strings.TrimRight(s, "0") != digits:
			t.Errorf("%s: %q leaves significant digits out without an ellipsis", s, got)
		case cut && strings.TrimRight(s, "0") == digits:
			t.Errorf("%s: %q has an ellipsis but leaves nothing out", s, got)
		}
	}
}

// TestEventsJSONCarriesEveryValueInFull: where the line shortens, --json
// prints every column of the event in full, the amount as an exact
// decimal string.
func TestEventsJSONCarriesEveryValueInFull(t *testing.T) {
	pool, dbURL := pgtest.NewPool(t)
	t.Setenv("DATABASE_URL", dbURL)
	ctx := context.Background()
	p := payments.Payment{
		ChainID: 1, Contract: "0x" + strings.Repeat("ab", 20), TxHash: lineTx, LogIndex: 7,
		BlockNumber: 21_000_000, BlockHash: "0x" + strings.Repeat("cd", 31) + "ef", Payer: linePayer,
		Digest: "0x" + strings.Repeat("34", 31) + "56", Amount: amountOf(t, maxUint256),
		BurnedAt: time.Date(2025, 3, 4, 14, 2, 59, 123_456_000, time.UTC),
	}
	const reason = "contract no longer followed by its group"
	confirmed := payments.EventFor(payments.KindConfirmed, p, 42)
	retracted := payments.EventFor(payments.KindRetracted, p, 0)
	retracted.Reason = reason
	tx, err := payments.NewStore(pool).Begin(ctx, payments.Limits{LockWait: time.Second, TxTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.AppendEvents(ctx, []payments.Event{confirmed, retracted}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	stored, err := payments.NewStore(pool).Events(ctx, 0, 10)
	if err != nil || len(stored) != 2 {
		t.Fatalf("stored %d events, %v", len(stored), err)
	}

	var out, errOut bytes.Buffer
	if code := run([]string{"events", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("events --json exited %d: %s", code, errOut.String())
	}
	lines := slices.Collect(strings.Lines(out.String()))
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for i, want := range []struct {
		kind, paymentID, reason string
	}{
		{payments.KindConfirmed, "42", ""},
		{payments.KindRetracted, "null", reason},
	} {
		fields := map[string]string{
			"seq":          strconv.Itoa(i + 1),
			"event_id":     quote(payments.EventID(1, lineTx, 7, want.kind, p.BlockHash)),
			"kind":         quote(want.kind),
			"chain_id":     "1",
			"contract":     quote(p.Contract),
			"tx_hash":      quote(lineTx),
			"log_index":    "7",
			"block_number": "21000000",
			"block_hash":   quote(p.BlockHash),
			"payer":        quote(linePayer),
			"digest":       quote(p.Digest),
			"amount":       quote(maxUint256),
			"payment_id":   want.paymentID,
		}
		if want.reason != "" {
			fields["reason"] = quote(want.reason)
		}
		if stored[i].EventID != payments.EventID(1, lineTx, 7, want.kind, p.BlockHash) {
			t.Errorf("event %d: stored event_id %q", i+1, stored[i].EventID)
		}
		checkJSONLine(t, lines[i], fields, map[string]time.Time{"burned_at": p.BurnedAt, "created_at": stored[i].CreatedAt})
	}

	// The same events for a person: shortened, in 80 characters.
	out.Reset()
	if code := run([]string{"events"}, &out, &errOut); code != 0 {
		t.Fatalf("events exited %d: %s", code, errOut.String())
	}
	for line := range strings.Lines(out.String()) {
		line = strings.TrimSuffix(line, "\n")
		if n := utf8.RuneCountInString(line); n > lineWidth || !strings.Contains(line, " 1.157…e77 0x3f1c…a2e1 0x9a4b…07c2 @21000000") {
			t.Errorf("%d characters: %q", n, line)
		}
	}
}

// checkJSONLine checks that line is a JSON object with exactly the fields
// of fields (each the JSON text given) and times (each that instant).
func checkJSONLine(t *testing.T, line string, fields map[string]string, times map[string]time.Time) {
	t.Helper()
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	want := slices.Concat(slices.Collect(maps.Keys(fields)), slices.Collect(maps.Keys(times)))
	slices.Sort(want)
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
		t.Errorf("fields %v, want %v: %s", keys, want, line)
	}
	for k, v := range fields {
		if string(got[k]) != v {
			t.Errorf("%s is %s, want %s", k, got[k], v)
		}
	}
	for k, v := range times {
		var at time.Time
		if err := json.Unmarshal(got[k], &at); err != nil || !at.Equal(v) {
			t.Errorf("%s is %s, want %s (%v)", k, got[k], v.Format(time.RFC3339Nano), err)
		}
	}
}
