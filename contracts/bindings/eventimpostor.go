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

// EventImpostorMetaData contains all meta data concerning the EventImpostor contract.
var EventImpostorMetaData = &bind.MetaData{
	ABI: "[{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"payer\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"},{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"digest\",\"type\":\"bytes32\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"timestamp\",\"type\":\"uint256\"}],\"name\":\"LogBurnWithDigest\",\"type\":\"event\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"},{\"internalType\":\"bytes32\",\"name\":\"digest\",\"type\":\"bytes32\"}],\"name\":\"fakeBurn\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"}]",
	Bin: "0x6080604052348015600e575f5ffd5b5060d080601a5f395ff3fe6080604052348015600e575f5ffd5b50600436106026575f3560e01c806306348b0014602a575b5f5ffd5b60396035366004607b565b603b565b005b60408051838152426020820152829133917ff09120ca4b005026b37bf2b4ec21e3d1fbee7365fb9b7ed7558eff94224841e8910160405180910390a35050565b5f5f60408385031215608b575f5ffd5b5050803592602090910135915056fea2646970667358221220dfb4413e8cc3d3a0676eea3722137711874ba79f1f781f54ed1477657b373e3d64736f6c63430008250033",
}

// EventImpostorABI is the input ABI used to generate the binding from.
// Deprecated: Use EventImpostorMetaData.ABI instead.
var EventImpostorABI = EventImpostorMetaData.ABI

// EventImpostorBin is the compiled bytecode used for deploying new contracts.
// Deprecated: Use EventImpostorMetaData.Bin instead.
var EventImpostorBin = EventImpostorMetaData.Bin

// DeployEventImpostor deploys a new Ethereum contract, binding an instance of EventImpostor to it.
func DeployEventImpostor(auth *bind.TransactOpts, backend bind.ContractBackend) (common.Address, *types.Transaction, *EventImpostor, error) {
	parsed, err := EventImpostorMetaData.GetAbi()
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	if parsed == nil {
		return common.Address{}, nil, nil, errors.New("GetABI returned nil")
	}

	address, tx, contract, err := bind.DeployContract(auth, *parsed, common.FromHex(EventImpostorBin), backend)
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	return address, tx, &EventImpostor{EventImpostorCaller: EventImpostorCaller{contract: contract}, EventImpostorTransactor: EventImpostorTransactor{contract: contract}, EventImpostorFilterer: EventImpostorFilterer{contract: contract}}, nil
}

// EventImpostor is an auto generated Go binding around an Ethereum contract.
type EventImpostor struct {
	EventImpostorCaller     // Read-only binding to the contract
	EventImpostorTransactor // Write-only binding to the contract
	EventImpostorFilterer   // Log filterer for contract events
}

// EventImpostorCaller is an auto generated read-only Go binding around an Ethereum contract.
type EventImpostorCaller struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// EventImpostorTransactor is an auto generated write-only Go binding around an Ethereum contract.
type EventImpostorTransactor struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// EventImpostorFilterer is an auto generated log filtering Go binding around an Ethereum contract events.
type EventImpostorFilterer struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// EventImpostorSession is an auto generated Go binding around an Ethereum contract,
// with pre-set call and transact options.
type EventImpostorSession struct {
	Contract     *EventImpostor    // Generic contract binding to set the session for
	CallOpts     bind.CallOpts     // Call options to use throughout this session
	TransactOpts bind.TransactOpts // Transaction auth options to use throughout this session
}

// EventImpostorCallerSession is an auto generated read-only Go binding around an Ethereum contract,
// with pre-set call options.
type EventImpostorCallerSession struct {
	Contract *EventImpostorCaller // Generic contract caller binding to set the session for
	CallOpts bind.CallOpts        // Call options to use throughout this session
}

// EventImpostorTransactorSession is an auto generated write-only Go binding around an Ethereum contract,
// with pre-set transact options.
type EventImpostorTransactorSession struct {
	Contract     *EventImpostorTransactor // Generic contract transactor binding to set the session for
	TransactOpts bind.TransactOpts        // Transaction auth options to use throughout this session
}

// EventImpostorRaw is an auto generated low-level Go binding around an Ethereum contract.
type EventImpostorRaw struct {
	Contract *EventImpostor // Generic contract binding to access the raw methods on
}

// EventImpostorCallerRaw is an auto generated low-level read-only Go binding around an Ethereum contract.
type EventImpostorCallerRaw struct {
	Contract *EventImpostorCaller // Generic read-only contract binding to access the raw methods on
}

// EventImpostorTransactorRaw is an auto generated low-level write-only Go binding around an Ethereum contract.
type EventImpostorTransactorRaw struct {
	Contract *EventImpostorTransactor // Generic write-only contract binding to access the raw methods on
}

// NewEventImpostor creates a new instance of EventImpostor, bound to a specific deployed contract.
func NewEventImpostor(address common.Address, backend bind.ContractBackend) (*EventImpostor, error) {
	contract, err := bindEventImpostor(address, backend, backend, backend)
	if err != nil {
		return nil, err
	}
	return &EventImpostor{EventImpostorCaller: EventImpostorCaller{contract: contract}, EventImpostorTransactor: EventImpostorTransactor{contract: contract}, EventImpostorFilterer: EventImpostorFilterer{contract: contract}}, nil
}

// NewEventImpostorCaller creates a new read-only instance of EventImpostor, bound to a specific deployed contract.
func NewEventImpostorCaller(address common.Address, caller bind.ContractCaller) (*EventImpostorCaller, error) {
	contract, err := bindEventImpostor(address, caller, nil, nil)
	if err != nil {
		return nil, err
	}
	return &EventImpostorCaller{contract: contract}, nil
}

// NewEventImpostorTransactor creates a new write-only instance of EventImpostor, bound to a specific deployed contract.
func NewEventImpostorTransactor(address common.Address, transactor bind.ContractTransactor) (*EventImpostorTransactor, error) {
	contract, err := bindEventImpostor(address, nil, transactor, nil)
	if err != nil {
		return nil, err
	}
	return &EventImpostorTransactor{contract: contract}, nil
}

// NewEventImpostorFilterer creates a new log filterer instance of EventImpostor, bound to a specific deployed contract.
func NewEventImpostorFilterer(address common.Address, filterer bind.ContractFilterer) (*EventImpostorFilterer, error) {
	contract, err := bindEventImpostor(address, nil, nil, filterer)
	if err != nil {
		return nil, err
	}
	return &EventImpostorFilterer{contract: contract}, nil
}

// bindEventImpostor binds a generic wrapper to an already deployed contract.
func bindEventImpostor(address common.Address, caller bind.ContractCaller, transactor bind.ContractTransactor, filterer bind.ContractFilterer) (*bind.BoundContract, error) {
	parsed, err := EventImpostorMetaData.GetAbi()
	if err != nil {
		return nil, err
	}
	return bind.NewBoundContract(address, *parsed, caller, transactor, filterer), nil
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_EventImpostor *EventImpostorRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _EventImpostor.Contract.EventImpostorCaller.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_EventImpostor *EventImpostorRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _EventImpostor.Contract.EventImpostorTransactor.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_EventImpostor *EventImpostorRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _EventImpostor.Contract.EventImpostorTransactor.contract.Transact(opts, method, params...)
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_EventImpostor *EventImpostorCallerRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _EventImpostor.Contract.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_EventImpostor *EventImpostorTransactorRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _EventImpostor.Contract.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_EventImpostor *EventImpostorTransactorRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _EventImpostor.Contract.contract.Transact(opts, method, params...)
}

// FakeBurn is a paid mutator transaction binding the contract method 0x06348b00.
//
// Solidity: function fakeBurn(uint256 amount, bytes32 digest) returns()
func (_EventImpostor *EventImpostorTransactor) FakeBurn(opts *bind.TransactOpts, amount *big.Int, digest [32]byte) (*types.Transaction, error) {
	return _EventImpostor.contract.Transact(opts, "fakeBurn", amount, digest)
}

// FakeBurn is a paid mutator transaction binding the contract method 0x06348b00.
//
// Solidity: function fakeBurn(uint256 amount, bytes32 digest) returns()
func (_EventImpostor *EventImpostorSession) FakeBurn(amount *big.Int, digest [32]byte) (*types.Transaction, error) {
	return _EventImpostor.Contract.FakeBurn(&_EventImpostor.TransactOpts, amount, digest)
}

// FakeBurn is a paid mutator transaction binding the contract method 0x06348b00.
//
// Solidity: function fakeBurn(uint256 amount, bytes32 digest) returns()
func (_EventImpostor *EventImpostorTransactorSession) FakeBurn(amount *big.Int, digest [32]byte) (*types.Transaction, error) {
	return _EventImpostor.Contract.FakeBurn(&_EventImpostor.TransactOpts, amount, digest)
}

// EventImpostorLogBurnWithDigestIterator is returned from FilterLogBurnWithDigest and is used to iterate over the raw logs and unpacked data for LogBurnWithDigest events raised by the EventImpostor contract.
type EventImpostorLogBurnWithDigestIterator struct {
	Event *EventImpostorLogBurnWithDigest // Event containing the contract specifics and raw log

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
func (it *EventImpostorLogBurnWithDigestIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(EventImpostorLogBurnWithDigest)
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
		it.Event = new(EventImpostorLogBurnWithDigest)
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
func (it *EventImpostorLogBurnWithDigestIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *EventImpostorLogBurnWithDigestIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// EventImpostorLogBurnWithDigest represents a LogBurnWithDigest event raised by the EventImpostor contract.
type EventImpostorLogBurnWithDigest struct {
	Payer     common.Address
	Amount    *big.Int
	Digest    [32]byte
	Timestamp *big.Int
	Raw       types.Log // Blockchain specific contextual infos
}

// FilterLogBurnWithDigest is a free log retrieval operation binding the contract event 0xf09120ca4b005026b37bf2b4ec21e3d1fbee7365fb9b7ed7558eff94224841e8.
//
// Solidity: event LogBurnWithDigest(address indexed payer, uint256 amount, bytes32 indexed digest, uint256 timestamp)
func (_EventImpostor *EventImpostorFilterer) FilterLogBurnWithDigest(opts *bind.FilterOpts, payer []common.Address, digest [][32]byte) (*EventImpostorLogBurnWithDigestIterator, error) {

	var payerRule []interface{}
	for _, payerItem := range payer {
		payerRule = append(payerRule, payerItem)
	}

	var digestRule []interface{}
	for _, digestItem := range digest {
		digestRule = append(digestRule, digestItem)
	}

	logs, sub, err := _EventImpostor.contract.FilterLogs(opts, "LogBurnWithDigest", payerRule, digestRule)
	if err != nil {
		return nil, err
	}
	return &EventImpostorLogBurnWithDigestIterator{contract: _EventImpostor.contract, event: "LogBurnWithDigest", logs: logs, sub: sub}, nil
}

// WatchLogBurnWithDigest is a free log subscription operation binding the contract event 0xf09120ca4b005026b37bf2b4ec21e3d1fbee7365fb9b7ed7558eff94224841e8.
//
// Solidity: event LogBurnWithDigest(address indexed payer, uint256 amount, bytes32 indexed digest, uint256 timestamp)
func (_EventImpostor *EventImpostorFilterer) WatchLogBurnWithDigest(opts *bind.WatchOpts, sink chan<- *EventImpostorLogBurnWithDigest, payer []common.Address, digest [][32]byte) (event.Subscription, error) {

	var payerRule []interface{}
	for _, payerItem := range payer {
		payerRule = append(payerRule, payerItem)
	}

	var digestRule []interface{}
	for _, digestItem := range digest {
		digestRule = append(digestRule, digestItem)
	}

	logs, sub, err := _EventImpostor.contract.WatchLogs(opts, "LogBurnWithDigest", payerRule, digestRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(EventImpostorLogBurnWithDigest)
				if err := _EventImpostor.contract.UnpackLog(event, "LogBurnWithDigest", log); err != nil {
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
func (_EventImpostor *EventImpostorFilterer) ParseLogBurnWithDigest(log types.Log) (*EventImpostorLogBurnWithDigest, error) {
	event := new(EventImpostorLogBurnWithDigest)
	if err := _EventImpostor.contract.UnpackLog(event, "LogBurnWithDigest", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}
