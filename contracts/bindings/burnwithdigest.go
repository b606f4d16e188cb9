// Code generated - DO NOT EDIT.
// This file is a generated binding and any manual changes will be lost.

package bindings

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"time"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/event"
)

// Reference imports to suppress errors if they are not otherwise used.
var (
	_ = errors.New
	_ = big.NewInt
	_ = strings.NewReader
	_ = ethereum.NotFound
	_ = bind.Bind
	_ = common.Big1
	_ = types.BloomLookup
	_ = event.NewSubscription
	_ = abi.ConvertType
	_ = time.Tick
	_ = context.Background
)

// BurnWithDigestMetaData contains all meta data concerning the BurnWithDigest contract.
var BurnWithDigestMetaData = &bind.MetaData{
	ABI: "[{\"inputs\":[{\"internalType\":\"contractIERC20\",\"name\":\"token_\",\"type\":\"address\"}],\"stateMutability\":\"nonpayable\",\"type\":\"constructor\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"payer\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"},{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"digest\",\"type\":\"bytes32\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"timestamp\",\"type\":\"uint256\"}],\"name\":\"LogBurnWithDigest\",\"type\":\"event\"},{\"inputs\":[],\"name\":\"BURN_ADDRESS\",\"outputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"},{\"internalType\":\"bytes32\",\"name\":\"digest\",\"type\":\"bytes32\"}],\"name\":\"burnWithDigest\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"token\",\"outputs\":[{\"internalType\":\"contractIERC20\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"}]",
	Bin: "0x60a060405234801561000f575f5ffd5b5060405161039f38038061039f83398101604081905261002e91610099565b6001600160a01b0381166100885760405162461bcd60e51b815260206004820152601560248201527f746f6b656e206973207a65726f20616464726573730000000000000000000000604482015260640160405180910390fd5b6001600160a01b03166080526100c6565b5f602082840312156100a9575f5ffd5b81516001600160a01b03811681146100bf575f5ffd5b9392505050565b6080516102bb6100e45f395f8181605d015261014b01526102bb5ff3fe608060405234801561000f575f5ffd5b506004361061003f575f3560e01c8063d78658b214610043578063fc0c546a14610058578063fccc28131461009b575b5f5ffd5b61005661005136600461023f565b6100a4565b005b61007f7f000000000000000000000000000000000000000000000000000000000000000081565b6040516001600160a01b03909116815260200160405180910390f35b61007f61dead81565b5f82116100e95760405162461bcd60e51b815260206004820152600e60248201526d616d6f756e74206973207a65726f60901b60448201526064015b60405180910390fd5b806101275760405162461bcd60e51b815260206004820152600e60248201526d646967657374206973207a65726f60901b60448201526064016100e0565b6040516323b872dd60e01b815233600482015261dead6024820152604481018390527f00000000000000000000000000000000000000000000000000000000000000006001600160a01b0316906323b872dd906064016020604051808303815f875af1158015610199573d5f5f3e3d5ffd5b505050506040513d601f19601f820116820180604052508101906101bd919061025f565b6101ff5760405162461bcd60e51b81526020600482015260136024820152721d1c985b9cd9995c919c9bdb4819985a5b1959606a1b60448201526064016100e0565b60408051838152426020820152829133917ff09120ca4b005026b37bf2b4ec21e3d1fbee7365fb9b7ed7558eff94224841e8910160405180910390a35050565b5f5f60408385031215610250575f5ffd5b50508035926020909101359150565b5f6020828403121561026f575f5ffd5b8151801515811461027e575f5ffd5b939250505056fea2646970667358221220ddf65034374d23fd3c0f26ad2b8c8053381bbde82b27d4898301a4d43478f7e964736f6c63430008250033",
}

// BurnWithDigestABI is the input ABI used to generate the binding from.
// Deprecated: Use BurnWithDigestMetaData.ABI instead.
var BurnWithDigestABI = BurnWithDigestMetaData.ABI

// BurnWithDigestBin is the compiled bytecode used for deploying new contracts.
// Deprecated: Use BurnWithDigestMetaData.Bin instead.
var BurnWithDigestBin = BurnWithDigestMetaData.Bin

// DeployBurnWithDigest deploys a new Ethereum contract, binding an instance of BurnWithDigest to it.
func DeployBurnWithDigest(auth *bind.TransactOpts, backend bind.ContractBackend, token_ common.Address) (common.Address, *types.Transaction, *BurnWithDigest, error) {
	parsed, err := BurnWithDigestMetaData.GetAbi()
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	if parsed == nil {
		return common.Address{}, nil, nil, errors.New("GetABI returned nil")
	}

	address, tx, contract, err := bind.DeployContract(auth, *parsed, common.FromHex(BurnWithDigestBin), backend, token_)
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	return address, tx, &BurnWithDigest{BurnWithDigestCaller: BurnWithDigestCaller{contract: contract}, BurnWithDigestTransactor: BurnWithDigestTransactor{contract: contract}, BurnWithDigestFilterer: BurnWithDigestFilterer{contract: contract}}, nil
}

// BurnWithDigest is an auto generated Go binding around an Ethereum contract.
type BurnWithDigest struct {
	BurnWithDigestCaller     // Read-only binding to the contract
	BurnWithDigestTransactor // Write-only binding to the contract
	BurnWithDigestFilterer   // Log filterer for contract events
}

// BurnWithDigestCaller is an auto generated read-only Go binding around an Ethereum contract.
type BurnWithDigestCaller struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// BurnWithDigestTransactor is an auto generated write-only Go binding around an Ethereum contract.
type BurnWithDigestTransactor struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// BurnWithDigestFilterer is an auto generated log filtering Go binding around an Ethereum contract events.
type BurnWithDigestFilterer struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// BurnWithDigestSession is an auto generated Go binding around an Ethereum contract,
// with pre-set call and transact options.
type BurnWithDigestSession struct {
	Contract     *BurnWithDigest   // Generic contract binding to set the session for
	CallOpts     bind.CallOpts     // Call options to use throughout this session
	TransactOpts bind.TransactOpts // Transaction auth options to use throughout this session
}

// BurnWithDigestCallerSession is an auto generated read-only Go binding around an Ethereum contract,
// with pre-set call options.
type BurnWithDigestCallerSession struct {
	Contract *BurnWithDigestCaller // Generic contract caller binding to set the session for
	CallOpts bind.CallOpts         // Call options to use throughout this session
}

// BurnWithDigestTransactorSession is an auto generated write-only Go binding around an Ethereum contract,
// with pre-set transact options.
type BurnWithDigestTransactorSession struct {
	Contract     *BurnWithDigestTransactor // Generic contract transactor binding to set the session for
	TransactOpts bind.TransactOpts         // Transaction auth options to use throughout this session
}

// BurnWithDigestRaw is an auto generated low-level Go binding around an Ethereum contract.
type BurnWithDigestRaw struct {
	Contract *BurnWithDigest // Generic contract binding to access the raw methods on
}

// BurnWithDigestCallerRaw is an auto generated low-level read-only Go binding around an Ethereum contract.
type BurnWithDigestCallerRaw struct {
	Contract *BurnWithDigestCaller // Generic read-only contract binding to access the raw methods on
}

// BurnWithDigestTransactorRaw is an auto generated low-level write-only Go binding around an Ethereum contract.
type BurnWithDigestTransactorRaw struct {
	Contract *BurnWithDigestTransactor // Generic write-only contract binding to access the raw methods on
}

// NewBurnWithDigest creates a new instance of BurnWithDigest, bound to a specific deployed contract.
func NewBurnWithDigest(address common.Address, backend bind.ContractBackend) (*BurnWithDigest, error) {
	contract, err := bindBurnWithDigest(address, backend, backend, backend)
	if err != nil {
		return nil, err
	}
	return &BurnWithDigest{BurnWithDigestCaller: BurnWithDigestCaller{contract: contract}, BurnWithDigestTransactor: BurnWithDigestTransactor{contract: contract}, BurnWithDigestFilterer: BurnWithDigestFilterer{contract: contract}}, nil
}

// NewBurnWithDigestCaller creates a new read-only instance of BurnWithDigest, bound to a specific deployed contract.
func NewBurnWithDigestCaller(address common.Address, caller bind.ContractCaller) (*BurnWithDigestCaller, error) {
	contract, err := bindBurnWithDigest(address, caller, nil, nil)
	if err != nil {
		return nil, err
	}
	return &BurnWithDigestCaller{contract: contract}, nil
}

// NewBurnWithDigestTransactor creates a new write-only instance of BurnWithDigest, bound to a specific deployed contract.
func NewBurnWithDigestTransactor(address common.Address, transactor bind.ContractTransactor) (*BurnWithDigestTransactor, error) {
	contract, err := bindBurnWithDigest(address, nil, transactor, nil)
	if err != nil {
		return nil, err
	}
	return &BurnWithDigestTransactor{contract: contract}, nil
}

// NewBurnWithDigestFilterer creates a new log filterer instance of BurnWithDigest, bound to a specific deployed contract.
func NewBurnWithDigestFilterer(address common.Address, filterer bind.ContractFilterer) (*BurnWithDigestFilterer, error) {
	contract, err := bindBurnWithDigest(address, nil, nil, filterer)
	if err != nil {
		return nil, err
	}
	return &BurnWithDigestFilterer{contract: contract}, nil
}

// bindBurnWithDigest binds a generic wrapper to an already deployed contract.
func bindBurnWithDigest(address common.Address, caller bind.ContractCaller, transactor bind.ContractTransactor, filterer bind.ContractFilterer) (*bind.BoundContract, error) {
	parsed, err := BurnWithDigestMetaData.GetAbi()
	if err != nil {
		return nil, err
	}
	return bind.NewBoundContract(address, *parsed, caller, transactor, filterer), nil
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_BurnWithDigest *BurnWithDigestRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _BurnWithDigest.Contract.BurnWithDigestCaller.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_BurnWithDigest *BurnWithDigestRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _BurnWithDigest.Contract.BurnWithDigestTransactor.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_BurnWithDigest *BurnWithDigestRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _BurnWithDigest.Contract.BurnWithDigestTransactor.contract.Transact(opts, method, params...)
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_BurnWithDigest *BurnWithDigestCallerRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _BurnWithDigest.Contract.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_BurnWithDigest *BurnWithDigestTransactorRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _BurnWithDigest.Contract.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_BurnWithDigest *BurnWithDigestTransactorRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _BurnWithDigest.Contract.contract.Transact(opts, method, params...)
}

// BURNADDRESS is a free data retrieval call binding the contract method 0xfccc2813.
//
// Solidity: function BURN_ADDRESS() view returns(address)
func (_BurnWithDigest *BurnWithDigestCaller) BURNADDRESS(opts *bind.CallOpts) (common.Address, error) {
	var out []interface{}
	err := _BurnWithDigest.contract.Call(opts, &out, "BURN_ADDRESS")

	if err != nil {
		return *new(common.Address), err
	}

	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)

	return out0, err

}

// BURNADDRESS is a free data retrieval call binding the contract method 0xfccc2813.
//
// Solidity: function BURN_ADDRESS() view returns(address)
func (_BurnWithDigest *BurnWithDigestSession) BURNADDRESS() (common.Address, error) {
	return _BurnWithDigest.Contract.BURNADDRESS(&_BurnWithDigest.CallOpts)
}

// BURNADDRESS is a free data retrieval call binding the contract method 0xfccc2813.
//
// Solidity: function BURN_ADDRESS() view returns(address)
func (_BurnWithDigest *BurnWithDigestCallerSession) BURNADDRESS() (common.Address, error) {
	return _BurnWithDigest.Contract.BURNADDRESS(&_BurnWithDigest.CallOpts)
}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_BurnWithDigest *BurnWithDigestCaller) Token(opts *bind.CallOpts) (common.Address, error) {
	var out []interface{}
	err := _BurnWithDigest.contract.Call(opts, &out, "token")

	if err != nil {
		return *new(common.Address), err
	}

	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)

	return out0, err

}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_BurnWithDigest *BurnWithDigestSession) Token() (common.Address, error) {
	return _BurnWithDigest.Contract.Token(&_BurnWithDigest.CallOpts)
}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_BurnWithDigest *BurnWithDigestCallerSession) Token() (common.Address, error) {
	return _BurnWithDigest.Contract.Token(&_BurnWithDigest.CallOpts)
}

// BurnWithDigest is a paid mutator transaction binding the contract method 0xd78658b2.
//
// Solidity: function burnWithDigest(uint256 amount, bytes32 digest) returns()
func (_BurnWithDigest *BurnWithDigestTransactor) BurnWithDigest(opts *bind.TransactOpts, amount *big.Int, digest [32]byte) (*types.Transaction, error) {
	return _BurnWithDigest.contract.Transact(opts, "burnWithDigest", amount, digest)
}

// BurnWithDigest is a paid mutator transaction binding the contract method 0xd78658b2.
//
// Solidity: function burnWithDigest(uint256 amount, bytes32 digest) returns()
func (_BurnWithDigest *BurnWithDigestSession) BurnWithDigest(amount *big.Int, digest [32]byte) (*types.Transaction, error) {
	return _BurnWithDigest.Contract.BurnWithDigest(&_BurnWithDigest.TransactOpts, amount, digest)
}

// BurnWithDigest is a paid mutator transaction binding the contract method 0xd78658b2.
//
// Solidity: function burnWithDigest(uint256 amount, bytes32 digest) returns()
func (_BurnWithDigest *BurnWithDigestTransactorSession) BurnWithDigest(amount *big.Int, digest [32]byte) (*types.Transaction, error) {
	return _BurnWithDigest.Contract.BurnWithDigest(&_BurnWithDigest.TransactOpts, amount, digest)
}

// BurnWithDigestLogBurnWithDigestIterator is returned from FilterLogBurnWithDigest and is used to iterate over the raw logs and unpacked data for LogBurnWithDigest events raised by the BurnWithDigest contract.
type BurnWithDigestLogBurnWithDigestIterator struct {
	Event *BurnWithDigestLogBurnWithDigest // Event containing the contract specifics and raw log

	contract *bind.BoundContract // Generic contract to use for unpacking event data
	event    string              // Event name to use for unpacking event data

	logs chan types.Log        // Log channel receiving the found contract events
	sub  ethereum.Subscription // Subscription for errors, completion and termination
	done bool                  // Whether the subscription completed delivering logs
	fail error                 // Occurred error to stop iteration
}

// Next advances the iterator to the subsequent event, returning whether there
// are any more events found. In case of a retrieval or parsing error, false is
// returned and Error() can be queried for the exact failure.
func (it *BurnWithDigestLogBurnWithDigestIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(BurnWithDigestLogBurnWithDigest)
			if err := it.contract.UnpackLog(it.Event, it.event, log); err != nil {
				it.fail = err
				return false
			}
			it.Event.Raw = log
			return true

		default:
			return false
		}
	}
	// Iterator still in progress, wait for either a data or an error event
	select {
	case log := <-it.logs:
		it.Event = new(BurnWithDigestLogBurnWithDigest)
		if err := it.contract.UnpackLog(it.Event, it.event, log); err != nil {
			it.fail = err
			return false
		}
		it.Event.Raw = log
		return true

	case err := <-it.sub.Err():
		it.done = true
		it.fail = err
		return it.Next()
	}
}

// Error returns any retrieval or parsing error occurred during filtering.
func (it *BurnWithDigestLogBurnWithDigestIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *BurnWithDigestLogBurnWithDigestIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// BurnWithDigestLogBurnWithDigest represents a LogBurnWithDigest event raised by the BurnWithDigest contract.
type BurnWithDigestLogBurnWithDigest struct {
	Payer     common.Address
	Amount    *big.Int
	Digest    [32]byte
	Timestamp *big.Int
	Raw       types.Log // Blockchain specific contextual infos
}

// FilterLogBurnWithDigest is a free log retrieval operation binding the contract event 0xf09120ca4b005026b37bf2b4ec21e3d1fbee7365fb9b7ed7558eff94224841e8.
//
// Solidity: event LogBurnWithDigest(address indexed payer, uint256 amount, bytes32 indexed digest, uint256 timestamp)
func (_BurnWithDigest *BurnWithDigestFilterer) FilterLogBurnWithDigest(opts *bind.FilterOpts, payer []common.Address, digest [][32]byte) (*BurnWithDigestLogBurnWithDigestIterator, error) {

	var payerRule []interface{}
	for _, payerItem := range payer {
		payerRule = append(payerRule, payerItem)
	}

	var digestRule []interface{}
	for _, digestItem := range digest {
		digestRule = append(digestRule, digestItem)
	}

	logs, sub, err := _BurnWithDigest.contract.FilterLogs(opts, "LogBurnWithDigest", payerRule, digestRule)
	if err != nil {
		return nil, err
	}
	return &BurnWithDigestLogBurnWithDigestIterator{contract: _BurnWithDigest.contract, event: "LogBurnWithDigest", logs: logs, sub: sub}, nil
}

// WatchLogBurnWithDigest is a free log subscription operation binding the contract event 0xf09120ca4b005026b37bf2b4ec21e3d1fbee7365fb9b7ed7558eff94224841e8.
//
// Solidity: event LogBurnWithDigest(address indexed payer, uint256 amount, bytes32 indexed digest, uint256 timestamp)
func (_BurnWithDigest *BurnWithDigestFilterer) WatchLogBurnWithDigest(opts *bind.WatchOpts, sink chan<- *BurnWithDigestLogBurnWithDigest, payer []common.Address, digest [][32]byte) (event.Subscription, error) {

	var payerRule []interface{}
	for _, payerItem := range payer {
		payerRule = append(payerRule, payerItem)
	}

	var digestRule []interface{}
	for _, digestItem := range digest {
		digestRule = append(digestRule, digestItem)
	}

	logs, sub, err := _BurnWithDigest.contract.WatchLogs(opts, "LogBurnWithDigest", payerRule, digestRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(BurnWithDigestLogBurnWithDigest)
				if err := _BurnWithDigest.contract.UnpackLog(event, "LogBurnWithDigest", log); err != nil {
					// If the signature doesn't match, skip this log.
					if errors.Is(err, bind.ErrEventSignatureMismatch) {
						continue
					}
					return err
				}
				event.Raw = log

				select {
				case sink <- event:
				case err := <-sub.Err():
					return err
				case <-quit:
					return nil
				}
			case err := <-sub.Err():
				return err
			case <-quit:
				return nil
			}
		}
	}), nil
}

// ParseLogBurnWithDigest is a log parse operation binding the contract event 0xf09120ca4b005026b37bf2b4ec21e3d1fbee7365fb9b7ed7558eff94224841e8.
//
// Solidity: event LogBurnWithDigest(address indexed payer, uint256 amount, bytes32 indexed digest, uint256 timestamp)
func (_BurnWithDigest *BurnWithDigestFilterer) ParseLogBurnWithDigest(log types.Log) (*BurnWithDigestLogBurnWithDigest, error) {
	event := new(BurnWithDigestLogBurnWithDigest)
	if err := _BurnWithDigest.contract.UnpackLog(event, "LogBurnWithDigest", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}
