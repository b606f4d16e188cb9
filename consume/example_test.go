package consume_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/payments"
)

// A service whose ledger is in the same database as burnpoller's credits
// each confirmed payment to its payer's balance exactly once, and takes the
// credit back when the same burn is retracted after it (an operator's
// cursor reset orphaned it): the credit and the consumer's offset commit in
// one transaction.
func Example() {
	pool, cleanup := examplePool() // pgxpool.New(ctx, os.Getenv("DATABASE_URL")) in a service
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if _, err := pool.Exec(ctx, `CREATE TABLE balances (payer text PRIMARY KEY, amount numeric NOT NULL);
		CREATE TABLE credits (chain_id bigint, contract text, tx_hash text, log_index int, block_hash text,
		    payer text NOT NULL, amount numeric NOT NULL, PRIMARY KEY (chain_id, contract, tx_hash, log_index))`); err != nil {
		log.Fatal(err)
	}
	err := consume.Run(ctx, pool, "balances", creditOrReverse,
		// A seen burn is not a credit (it may still be retracted); a
		// retracted one after its confirmed takes the credit back.
		consume.Kinds(payments.KindConfirmed, payments.KindRetracted),
		// For the example only: stop once every event is handled. A service
		// runs until its shutdown signal cancels ctx.
		consume.OnProgress(func(p consume.Progress) {
			if p.Lag() == 0 {
				cancel()
			}
		}))
	if err != nil {
		log.Fatal(err)
	}

	rows, err := pool.Query(context.Background(), `SELECT payer, amount::text FROM balances ORDER BY payer`)
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var payer, amount string
		if err := rows.Scan(&payer, &amount); err != nil {
			log.Fatal(err)
		}
		fmt.Println(payer, amount)
	}
	// Output:
	// 0x00000000000000000000000000000000000000b0 250
	// 0x000000000000000000000000000000000000a11c 1500000
}

// creditOrReverse credits each confirmed payment to its payer and takes a
// credit back when the same burn is retracted after it. credits holds what
// was credited (see Example for the tables). Run it with
// consume.Kinds(payments.KindConfirmed, payments.KindRetracted).
func creditOrReverse(ctx context.Context, tx pgx.Tx, e payments.Event) error {
	switch e.Kind {
	case payments.KindConfirmed:
		if _, err := tx.Exec(ctx, `INSERT INTO credits (chain_id, contract, tx_hash, log_index, block_hash, payer, amount)
			VALUES ($1, $2, $3, $4, $5, $6, $7::numeric)`,
			e.ChainID, e.Contract, e.TxHash, e.LogIndex, e.BlockHash, e.Payer, e.Amount.String()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO balances (payer, amount) VALUES ($1, $2::numeric)
			ON CONFLICT (payer) DO UPDATE SET amount = balances.amount + excluded.amount`,
			e.Payer, e.Amount.String())
		return err
	case payments.KindRetracted:
		var payer, amount string
		err := tx.QueryRow(ctx, `DELETE FROM credits
			WHERE chain_id = $1 AND contract = $2 AND tx_hash = $3 AND log_index = $4 AND block_hash = $5
			RETURNING payer, amount::text`, e.ChainID, e.Contract, e.TxHash, e.LogIndex, e.BlockHash).Scan(&payer, &amount)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // never credited: a seen burn that left the chain
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE balances SET amount = amount - $2::numeric WHERE payer = $1`, payer, amount)
		return err
	}
	return nil
}

// A handler whose effect lives elsewhere (a message to another system) is
// handed each event at least once, and deduplicates on its event_id.
func ExampleRunAtLeastOnce() {
	pool, cleanup := examplePool()
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	sent := map[string]bool{} // stands for the receiver's record of event ids
	notify := func(ctx context.Context, e payments.Event) error {
		if sent[e.EventID] {
			return nil // handed over again after a crash: already done
		}
		sent[e.EventID] = true
		fmt.Println(e.Seq, e.Kind, e.Payer, e.Amount)
		return nil
	}
	err := consume.RunAtLeastOnce(ctx, pool, "notifier", notify,
		consume.OnProgress(func(p consume.Progress) {
			if p.Lag() == 0 {
				cancel()
			}
		}))
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// 1 seen 0x000000000000000000000000000000000000a11c 1000000
	// 2 confirmed 0x000000000000000000000000000000000000a11c 1000000
	// 3 confirmed 0x00000000000000000000000000000000000000b0 250
	// 4 seen 0x000000000000000000000000000000000000a11c 500000
	// 5 confirmed 0x000000000000000000000000000000000000a11c 500000
	// 6 retracted 0x00000000000000000000000000000000000000b0 250
	// 7 confirmed 0x00000000000000000000000000000000000000b0 250
}
