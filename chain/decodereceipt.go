package chain

import (
	"fmt"

	"github.com/ethereum/go-ethereum/core/types"
)

// readReceipts reads an eth_getBlockReceipts result into p.
func (d *replyReader) readReceipts(p *[]rpcReceipt) (refused, err error) {
	var g grower[rpcReceipt]
	null, refused, err := d.readArray("the result", func(i int) (error, error) {
		null, refused, err := d.readReceipt(g.add())
		if refused == nil && null {
			refused = refuse("null")
		}
		if refused != nil {
			refused = fmt.Errorf("receipt %d of the reply: %w", i, refused)
		}
		return refused, err
	})
	if refused != nil || err != nil || null {
		return refused, err
	}
	*p = g.slice()
	return nil, nil
}

// readReceiptOrNull reads an eth_getTransactionReceipt result into p:
// null for a transaction the node does not know.
func (d *replyReader) readReceiptOrNull(p **rpcReceipt) (refused, err error) {
	r := new(rpcReceipt)
	null, refused, err := d.readReceipt(r)
	if refused != nil || err != nil || null {
		if refused != nil {
			refused = fmt.Errorf("the receipt: %w", refused)
		}
		return refused, err
	}
	*p = r
	return nil, nil
}

// The fields of a receipt, as rpcReceipt names them.
var receiptFields = []string{"transactionHash", "blockHash", "status", "logs"}

// readReceipt reads a receipt into r: an object with a transaction hash,
// a block hash and a status, and logs (rpcLog.toLog) given once, of which
// it keeps the burn-event ones (rpcReceipt). null is no receipt.
func (d *replyReader) readReceipt(r *rpcReceipt) (null bool, refused, err error) {
	var has [3]bool
	logs := false
	null, refused, err = d.readObject("a receipt", func(key []byte) (error, error) {
		f := field(key, receiptFields)
		if f < 0 {
			return nil, d.skip()
		}
		if f == 3 && logs {
			// encoding/json would decode the second array into the first's
			// logs, merging the two: no node sends that.
			return refuse("logs given twice"), d.skip()
		}
		null, err := d.null()
		if err != nil {
			return nil, err
		}
		if f < 3 {
			has[f] = !null
		}
		switch {
		case null && f == 3:
			logs, r.Logs = true, nil
			return nil, nil
		case null:
			return nil, nil
		case f == 0:
			return d.fixed("transactionHash", r.TxHash[:])
		case f == 1:
			return d.fixed("blockHash", r.BlockHash[:])
		case f == 2:
			r.Status, refused, err = d.quantity("status")
			return refused, err
		}
		logs = true
		var g grower[types.Log]
		null, refused, err := d.readArray("logs", func(i int) (error, error) {
			m, l := d.mark(), g.add()
			refused, err := d.readLog(i, l)
			if refused == nil && err == nil && (len(l.Topics) == 0 || l.Topics[0] != BurnTopic) {
				// Checked, and of no use to the cross-check: not kept
				// (rpcReceipt).
				g.drop()
				d.reclaim(m)
			}
			return refused, err
		})
		if refused == nil && err == nil && !null {
			r.Logs = g.slice()
		}
		return refused, err
	})
	if refused != nil || err != nil || null {
		return null, refused, err
	}
	for f, ok := range has {
		if !ok {
			return false, refuse("it lacks %s", receiptFields[f]), nil
		}
	}
	return false, nil, nil
}
