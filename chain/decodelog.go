package chain

import (
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// readLogs reads an eth_getLogs result into p.
func (d *replyReader) readLogs(p *[]types.Log) (refused, err error) {
	var g grower[types.Log]
	null, refused, err := d.readArray("the result", func(i int) (error, error) {
		return d.readLog(i, g.add())
	})
	if refused != nil || err != nil || null {
		return refused, err
	}
	*p = g.slice()
	return nil, nil
}

// The fields of a log, as rpcLog names them, in the order of logField.
var logFields = []string{"address", "topics", "data", "blockNumber", "transactionHash", "transactionIndex", "blockHash", "logIndex", "removed"}

// removedValues are what a log's Removed points to.
var removedValues = [2]bool{false, true}

// readLog reads log i of a result or a receipt into out: an object with
// the fields a log must have (rpcLog.toLog).
func (d *replyReader) readLog(i int, out *types.Log) (refused, err error) {
	var l rpcLog
	null, refused, err := d.readObject("a log", func(key []byte) (error, error) {
		f := logField(key)
		if f < 0 {
			return nil, d.skip()
		}
		null, err := d.null()
		if err != nil || null {
			l.clear(f)
			return nil, err
		}
		return d.readLogField(&l, f)
	})
	switch {
	case err != nil:
		return nil, err
	case refused != nil:
		return fmt.Errorf("log %d of the reply: %w", i, refused), nil
	case null:
		return refuse("log %d of the reply is null", i), nil
	}
	*out, refused = l.toLog(i)
	return refused, nil
}

// logField is the index in logFields of key's field, or -1.
func logField(key []byte) int {
	switch string(key) { // as nodes spell them: at once
	case "address":
		return 0
	case "topics":
		return 1
	case "data":
		return 2
	case "blockNumber":
		return 3
	case "transactionHash":
		return 4
	case "transactionIndex":
		return 5
	case "blockHash":
		return 6
	case "logIndex":
		return 7
	case "removed":
		return 8
	}
	return field(key, logFields)
}

// clear leaves field f (logField) of l absent, as null does.
func (l *rpcLog) clear(f int) {
	switch f {
	case 0:
		l.Address = optAddress{}
	case 1:
		l.Topics = nil
	case 2:
		l.Data = optBytes{}
	case 3:
		l.BlockNumber = optUint64{}
	case 4:
		l.TxHash = optHash{}
	case 5:
		l.TxIndex = optUint{}
	case 6:
		l.BlockHash = optHash{}
	case 7:
		l.Index = optUint{}
	case 8:
		l.Removed = nil
	}
}

// readLogField reads the value of field f (logField) of l, not null.
func (d *replyReader) readLogField(l *rpcLog, f int) (refused, err error) {
	l.clear(f)
	switch f {
	case 0:
		l.Address.set = true
		return d.fixed("address", l.Address.v[:])
	case 1:
		return d.readTopics(l)
	case 2:
		l.Data.set = true
		l.Data.v, refused, err = d.hexBytes("data")
		return refused, err
	case 3:
		l.BlockNumber.set = true
		var v uint64
		v, refused, err = d.quantity("blockNumber")
		l.BlockNumber.v = hexutil.Uint64(v)
		return refused, err
	case 4:
		l.TxHash.set = true
		return d.fixed("transactionHash", l.TxHash.v[:])
	case 5:
		l.TxIndex.set = true
		var v uint64
		v, refused, err = d.quantity("transactionIndex")
		l.TxIndex.v = hexutil.Uint(v)
		return refused, err
	case 6:
		l.BlockHash.set = true
		return d.fixed("blockHash", l.BlockHash.v[:])
	case 7:
		l.Index.set = true
		var v uint64
		v, refused, err = d.quantity("logIndex")
		l.Index.v = hexutil.Uint(v)
		return refused, err
	default:
		c, ok := d.peek()
		switch {
		case ok && c == 't':
			l.Removed = &removedValues[1]
			return nil, d.word("true")
		case ok && c == 'f':
			l.Removed = &removedValues[0]
			return nil, d.word("false")
		}
		return refuse("removed is not true or false"), d.skip()
	}
}

// maxTopics is the most topics a log has (LOG0 to LOG4).
const maxTopics = 4

// readTopics reads a log's topics, an array of at most maxTopics hashes.
func (d *replyReader) readTopics(l *rpcLog) (refused, err error) {
	var got [maxTopics]common.Hash
	n := 0
	null, refused, err := d.readArray("topics", func(i int) (error, error) {
		if i == maxTopics {
			return refuse("more than %d topics", maxTopics), d.skip()
		}
		n++
		return d.fixed("a topic", got[i][:])
	})
	if refused != nil || err != nil || null {
		return refused, err
	}
	l.Topics = []common.Hash{} // present, and empty: not nil
	if n > 0 {
		l.Topics = d.hashes(n)
		copy(l.Topics, got[:n])
	}
	return nil, nil
}
