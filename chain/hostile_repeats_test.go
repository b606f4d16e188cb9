package chain_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/burnpoller/burnpoller/internal/hostile"
)

// manyFieldsData is an error's data just under the 4 KiB the reader keeps
// (maxErrorData): an object of as many distinct tiny fields as fit.
func manyFieldsData() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b strings.Builder
	b.WriteString("{")
	for i := 0; ; i++ {
		f := fmt.Sprintf(`"%c%c":0`, alphabet[i/len(alphabet)], alphabet[i%len(alphabet)])
		if b.Len()+len(f)+2 > 4<<10 {
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(f)
	}
	b.WriteString("}")
	return b.String()
}

// manyFieldErrorShapes are errors whose data has many tiny fields, given
// again and again.
func manyFieldErrorShapes() []replyShape {
	data := manyFieldsData()
	errObj := `{"code":-32000,"message":"m","data":` + data + `}`
	null := [][]byte{[]byte(`"result":null`)}
	return []replyShape{
		// The reply's "error" key given again and again, each with data of
		// many fields: each one is decoded into a map whole.
		custom(chainIDFlow, "an error of many-field data given again and again", false,
			repeated("", `"error":`+errObj, ",", ""), func(f *flow, v []byte, calls []hostile.Call, batch bool) [][]byte {
				return members(f, calls, batch, [][]byte{v})
			}),
		custom(headerFlow, "an error of many-field data given again and again (a batch)", false,
			repeated("", `"error":`+errObj, ",", ""), func(f *flow, v []byte, calls []hostile.Call, batch bool) [][]byte {
				return members(f, calls, batch, [][]byte{v})
			}),
		// A batch of others' members whose errors, of many-field data, come
		// before their id.
		custom(headerFlow, "a batch of many-field errors before their id", false,
			repeated("", `{"jsonrpc":"2.0","error":`+errObj+`,"id":99}`, ",", "]"), func(f *flow, v []byte, calls []hostile.Call, _ bool) [][]byte {
				return append(append([][]byte{[]byte("[")}, members(f, calls, false, null)...), []byte(","), v)
			}),
	}
}

// TestErrorDataOfManyFieldsIsBounded: an error's data of many tiny
// fields under maxErrorData, given again and again (in one reply, or in a
// batch's members before their id), is read within the bound: it is kept
// as its bytes and read only when the error is classified (decoded whole
// into a map for every error read, it cost 33 times the reply).
func TestErrorDataOfManyFieldsIsBounded(t *testing.T) {
	boundedShapes(t, manyFieldErrorShapes())
}

// TestErrorMessageOfInvalidUTF8IsBounded: an error's message of 171
// bytes that are not UTF-8 (513 bytes of U+FFFD) given again and again is
// read into one buffer and made a string once (a string for each cost 16
// times the reply).
func TestErrorMessageOfInvalidUTF8IsBounded(t *testing.T) {
	bad := strings.Repeat("\xff", 171)
	shapes := []replyShape{
		errorReply(chainIDFlow, "an error message of bytes not UTF-8 given again and again", repeated(`{"code":-32000,`, `"message":"`+bad+`"`, ",", "}")),
		errorReply(headerFlow, "an error message of bytes not UTF-8 given again and again", repeated(`{"code":-32000,`, `"message":"`+bad+`"`, ",", "}")),
	}
	boundedShapes(t, shapes)
}

// resultAgain is a shape whose target member, its id first, gives unit
// (a result) again and again, the last one standing.
func resultAgain(f *flow, name, unit string, ok bool) replyShape {
	return custom(f, name, ok, repeated("", unit, ",", ""), func(f *flow, v []byte, calls []hostile.Call, batch bool) [][]byte {
		return members(f, calls, batch, [][]byte{v})
	})
}

// TestSmallResultGivenAgainAndAgainIsBounded: a member whose id comes
// first and whose result, tiny, is given again and again is read within
// the bound: the results after the first are held as bytes and the last is
// decoded once (decoding each, a block's {} cost 45 times the reply).
func TestSmallResultGivenAgainAndAgainIsBounded(t *testing.T) {
	shapes := []replyShape{
		resultAgain(headerFlow, "a block's result {} given again and again", `"result":{}`, false),
		resultAgain(headerFlow, "a block's result null given again and again", `"result":null`, false),
		resultAgain(tagFlow, "a block's result {} given again and again (a call)", `"result":{}`, false),
		resultAgain(receiptFlow, "a receipt's result {} given again and again", `"result":{}`, false),
		resultAgain(receiptFlow, "a receipt's result null given again and again", `"result":null`, false),
		// A valid result, the last of many: go-ethereum's client takes it.
		resultAgain(chainIDFlow, "a chain id given again and again", `"result":"0x1"`, true),
	}
	boundedShapes(t, shapes)
}
