package consume_test

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// examplePool returns a pool on a database of its own holding eight payment
// events: 0x…a11c pays 1000000 (seen, then confirmed), 0x…b0 pays 250
// (confirmed without being seen first), 0x…a11c pays 500000 (seen, then
// confirmed); then an operator's cursor reset orphans 0x…b0's payment
// (retracted) and the chain's new branch holds the same burn in another
// block (confirmed again); and the function that drops it.
func examplePool() (*pgxpool.Pool, func()) {
	tb := &exampleTB{}
	pool, _ := pgtest.NewPool(tb)
	a11c, b0 := fmt.Sprintf("0x%040s", "a11c"), fmt.Sprintf("0x%040s", "b0")
	burn := func(i int, kind, payer string, amount int64) payments.Event {
		e := makeEvent(i, spec{kind: kind})
		e.Payer, e.Amount = payer, big.NewInt(amount)
		return e
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	moved := burn(2, payments.KindConfirmed, b0, 250)
	moved.BlockNumber, moved.BlockHash = 150, blockHash(150)
	moved.EventID = payments.EventID(moved.ChainID, moved.TxHash, moved.LogIndex, moved.Kind, moved.BlockHash)
	for _, evs := range [][]payments.Event{
		{burn(1, payments.KindSeen, a11c, 1000000)},
		{burn(1, payments.KindConfirmed, a11c, 1000000), burn(2, payments.KindConfirmed, b0, 250)},
		{burn(3, payments.KindSeen, a11c, 500000)},
		{burn(3, payments.KindConfirmed, a11c, 500000)},
		{burn(2, payments.KindRetracted, b0, 250)},
		{moved},
	} {
		if evs[0].Kind == payments.KindRetracted {
			// The reset marks the payment orphaned as it records the
			// retracted event.
			if _, err := pool.Exec(ctx, `UPDATE payments SET orphaned_at = now() WHERE tx_hash = $1`, evs[0].TxHash); err != nil {
				tb.cleanup()
				panic(err)
			}
		}
		if _, err := appendEvents(ctx, pool, evs...); err != nil {
			tb.cleanup()
			panic(err)
		}
	}
	return pool, tb.cleanup
}

// exampleTB lets an Example use pgtest, which reports through testing.TB:
// a failure panics, which fails the example. Only the methods pgtest calls
// are implemented; the embedded nil TB stands for the rest.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (*exampleTB) Helper()                           {}
func (*exampleTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (*exampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (*exampleTB) Logf(format string, args ...any)   { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (tb *exampleTB) Cleanup(f func())               { tb.cleanups = append(tb.cleanups, f) }

// cleanup runs the cleanups, last registered first.
func (tb *exampleTB) cleanup() {
	for _, f := range slices.Backward(tb.cleanups) {
		f()
	}
	tb.cleanups = nil
}
