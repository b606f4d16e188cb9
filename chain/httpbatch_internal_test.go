package chain

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/rpc"
)

// failingReader yields s, then err.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func TestDecodeBatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		give     string
		readErr  error // after the reply, the reader fails with it
		want     []string
		wantErrs []string // each element's error, "" for none
		wantErr  string   // the whole batch's
	}{
		{
			name:     "results in order",
			give:     `[{"jsonrpc":"2.0","id":0,"result":"a"},{"jsonrpc":"2.0","id":1,"result":"b"}]`,
			want:     []string{"a", "b"},
			wantErrs: []string{"", ""},
		},
		{
			name:     "out of order, result before id, extra fields",
			give:     `[{"result":"b","jsonrpc":"2.0","id":1,"x":[1,{"y":2}]},{"id":"0","result":"a"}]`,
			want:     []string{"a", "b"},
			wantErrs: []string{"", ""},
		},
		{
			name:     "an error, a missing reply",
			give:     `[{"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"exceed maximum block range: 10","data":"d"}}]`,
			want:     []string{"", ""},
			wantErrs: []string{"exceed maximum block range: 10 (-32602, data d)", rpc.ErrMissingBatchResponse.Error()},
		},
		{
			name:     "null result, no result",
			give:     `[{"id":0,"result":null},{"id":1}]`,
			want:     []string{"", ""},
			wantErrs: []string{"", rpc.ErrNoResult.Error()},
		},
		{
			name:     "a result of the wrong type is that element's error",
			give:     `[{"id":0,"result":{"no":"string"}},{"id":1,"result":"b"}]`,
			want:     []string{"", "b"},
			wantErrs: []string{"json: cannot unmarshal object into Go value of type string", ""},
		},
		{
			name:     "unknown ids and repeats are passed over",
			give:     `[{"id":7,"result":"x"},{"id":null,"error":{"code":-32700,"message":"parse"}},{"id":0,"result":"a"},{"id":0,"result":"z"},{"id":1,"result":"b"}]`,
			want:     []string{"a", "b"},
			wantErrs: []string{"", ""},
		},
		{
			name:    "one error object for the whole batch",
			give:    `{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"rate limit exceeded"}}`,
			want:    []string{"", ""},
			wantErr: "rate limit exceeded",
		},
		{name: "not JSON", give: `<html>`, want: []string{"", ""}, wantErr: "invalid character"},
		{name: "cut short", give: `[{"id":0,"result":"a"},{"id":1,"res`, want: []string{"a", ""}, wantErr: "unexpected EOF"},
		{
			name:    "cut at the reply cap",
			give:    `[{"id":0,"result":"a"},{"id":1,"result":"bbb`,
			readErr: ErrResponseTooLarge,
			want:    []string{"a", ""},
			wantErr: ErrResponseTooLarge.Error(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := make([]string, 2)
			elems := []rpc.BatchElem{{Method: "m", Result: &got[0]}, {Method: "m", Result: &got[1]}}
			var r io.Reader = strings.NewReader(tt.give)
			if tt.readErr != nil {
				r = &failingReader{r: r, err: tt.readErr}
			}
			err := decodeBatch(r, elems)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("decodeBatch = %v, want an error with %q", err, tt.wantErr)
				}
				if tt.readErr != nil && !errors.Is(err, tt.readErr) {
					t.Fatalf("decodeBatch = %v, want it to wrap %v", err, tt.readErr)
				}
				// A batch's failure is never one call's JSON-RPC error,
				// which classify would read as that call's.
				if re := rpc.Error(nil); errors.As(err, &re) {
					t.Fatalf("decodeBatch = %v, an rpc.Error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, el := range elems {
				msg := ""
				if el.Error != nil {
					msg = el.Error.Error()
					var re rpc.Error
					var de rpc.DataError
					if errors.As(el.Error, &re) && errors.As(el.Error, &de) {
						msg = msg + " (" + strconv.Itoa(re.ErrorCode()) + ", data " + de.ErrorData().(string) + ")"
					}
				}
				if msg != tt.wantErrs[i] {
					t.Errorf("element %d error %q, want %q", i, msg, tt.wantErrs[i])
				}
				if got[i] != tt.want[i] {
					t.Errorf("element %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestDecodeCall: the one reply to a lone call answers it whatever its
// id, as with go-ethereum's client.
func TestDecodeCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		give    string
		want    string
		wantErr string // the call's
	}{
		{name: "a result", give: `{"jsonrpc":"2.0","id":1,"result":"a"}`, want: "a"},
		{name: "another id, result first", give: `{"result":"a","id":"x"}`, want: "a"},
		{name: "an error with a null id", give: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, wantErr: "parse error"},
		{name: "no result", give: `{"jsonrpc":"2.0","id":1}`, wantErr: rpc.ErrNoResult.Error()},
		{name: "a batch", give: `[{"id":1,"result":"a"}]`, wantErr: "reading the reply: reply is not JSON: invalid character '['"},
		{name: "not JSON", give: `<html>`, wantErr: "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got string
			el := rpc.BatchElem{Method: "m", Result: &got}
			err := decodeCall(strings.NewReader(tt.give), &el)
			if err == nil {
				err = el.Error
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("decodeCall = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("decodeCall = %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}
