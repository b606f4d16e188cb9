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

// BatchBurnerMetaData contains all meta data concerning the BatchBurner contract.
var BatchBurnerMetaData = &bind.MetaData{
	ABI: "[{\"inputs\":[{\"internalType\":\"contractIERC20\",\"name\":\"token_\",\"type\":\"address\"},{\"internalType\":\"contractBurnWithDigest\",\"name\":\"burner_\",\"type\":\"address\"}],\"stateMutability\":\"nonpayable\",\"type\":\"constructor\"},{\"inputs\":[{\"internalType\":\"uint256[]\",\"name\":\"amounts\",\"type\":\"uint256[]\"},{\"internalType\":\"bytes32[]\",\"name\":\"digests\",\"type\":\"bytes32[]\"}],\"name\":\"burnMany\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"amount1\",\"type\":\"uint256\"},{\"internalType\":\"bytes32\",\"name\":\"digest1\",\"type\":\"bytes32\"},{\"internalType\":\"uint256\",\"name\":\"amount2\",\"type\":\"uint256\"},{\"internalType\":\"bytes32\",\"name\":\"digest2\",\"type\":\"bytes32\"}],\"name\":\"burnTwice\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"burner\",\"outputs\":[{\"internalType\":\"contractBurnWithDigest\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"token\",\"outputs\":[{\"internalType\":\"contractIERC20\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"}]",
	Bin: "0x60c060405234801561000f575f5ffd5b5060405161076638038061076683398101604081905261002e9161005c565b6001600160a01b039182166080521660a052610094565b6001600160a01b0381168114610059575f5ffd5b50565b5f5f6040838503121561006d575f5ffd5b825161007881610045565b602084015190925061008981610045565b809150509250929050565b60805160a0516106896100dd5f395f81816068015281816101750152818161026a015281816102e4015261043801525f818160be0152818161036d015261046701526106895ff3fe608060405234801561000f575f5ffd5b506004361061004a575f3560e01c80630274181d1461004e57806327810b6e14610063578063dbc55dd6146100a6578063fc0c546a146100b9575b5f5ffd5b61006161005c366004610559565b6100e0565b005b61008a7f000000000000000000000000000000000000000000000000000000000000000081565b6040516001600160a01b03909116815260200160405180910390f35b6100616100b43660046105c5565b61023b565b61008a7f000000000000000000000000000000000000000000000000000000000000000081565b8281146101265760405162461bcd60e51b815260206004820152600f60248201526e0d8cadccee8d040dad2e6dac2e8c6d608b1b60448201526064015b60405180910390fd5b5f805b8481101561015f57858582818110610143576101436105f4565b90506020020135826101559190610608565b9150600101610129565b506101698161034b565b5f5b84811015610233577f00000000000000000000000000000000000000000000000000000000000000006001600160a01b031663d78658b28787848181106101b4576101b46105f4565b905060200201358686858181106101cd576101cd6105f4565b905060200201356040518363ffffffff1660e01b81526004016101fa929190918252602082015260400190565b5f604051808303815f87803b158015610211575f5ffd5b505af1158015610223573d5f5f3e3d5ffd5b50506001909201915061016b9050565b505050505050565b61024d6102488386610608565b61034b565b604051636bc32c5960e11b815260048101859052602481018490527f00000000000000000000000000000000000000000000000000000000000000006001600160a01b03169063d78658b2906044015f604051808303815f87803b1580156102b3575f5ffd5b505af11580156102c5573d5f5f3e3d5ffd5b5050604051636bc32c5960e11b815260048101859052602481018490527f00000000000000000000000000000000000000000000000000000000000000006001600160a01b0316925063d78658b291506044015f604051808303815f87803b15801561032f575f5ffd5b505af1158015610341573d5f5f3e3d5ffd5b5050505050505050565b6040516323b872dd60e01b8152336004820152306024820152604481018290527f00000000000000000000000000000000000000000000000000000000000000006001600160a01b0316906323b872dd906064016020604051808303815f875af11580156103bb573d5f5f3e3d5ffd5b505050506040513d601f19601f820116820180604052508101906103df919061062d565b6104215760405162461bcd60e51b81526020600482015260136024820152721d1c985b9cd9995c919c9bdb4819985a5b1959606a1b604482015260640161011d565b60405163095ea7b360e01b81526001600160a01b037f000000000000000000000000000000000000000000000000000000000000000081166004830152602482018390527f0000000000000000000000000000000000000000000000000000000000000000169063095ea7b3906044016020604051808303815f875af11580156104ad573d5f5f3e3d5ffd5b505050506040513d601f19601f820116820180604052508101906104d1919061062d565b61050e5760405162461bcd60e51b815260206004820152600e60248201526d185c1c1c9bdd994819985a5b195960921b604482015260640161011d565b50565b5f5f83601f840112610521575f5ffd5b50813567ffffffffffffffff811115610538575f5ffd5b6020830191508360208260051b8501011115610552575f5ffd5b9250929050565b5f5f5f5f6040858703121561056c575f5ffd5b843567ffffffffffffffff811115610582575f5ffd5b61058e87828801610511565b909550935050602085013567ffffffffffffffff8111156105ad575f5ffd5b6105b987828801610511565b95989497509550505050565b5f5f5f5f608085870312156105d8575f5ffd5b5050823594602084013594506040840135936060013592509050565b634e487b7160e01b5f52603260045260245ffd5b8082018082111561062757634e487b7160e01b5f52601160045260245ffd5b92915050565b5f6020828403121561063d575f5ffd5b8151801515811461064c575f5ffd5b939250505056fea2646970667358221220fe2af3003f87c3c27df64edebe45d21b47073c1333ccdf8cda953d462dd826c264736f6c63430008250033",
}

// BatchBurnerABI is the input ABI used to generate the binding from.
// Deprecated: Use BatchBurnerMetaData.ABI instead.
var BatchBurnerABI = BatchBurnerMetaData.ABI

// BatchBurnerBin is the compiled bytecode used for deploying new contracts.
// Deprecated: Use BatchBurnerMetaData.Bin instead.
var BatchBurnerBin = BatchBurnerMetaData.Bin

// DeployBatchBurner deploys a new Ethereum contract, binding an instance of BatchBurner to it.
func DeployBatchBurner(auth *bind.TransactOpts, backend bind.ContractBackend, token_ common.Address, burner_ common.Address) (common.Address, *types.Transaction, *BatchBurner, error) {
	parsed, err := BatchBurnerMetaData.GetAbi()
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	if parsed == nil {
		return common.Address{}, nil, nil, errors.New("GetABI returned nil")
	}

	address, tx, contract, err := bind.DeployContract(auth, *parsed, common.FromHex(BatchBurnerBin), backend, token_, burner_)
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	return address, tx, &BatchBurner{BatchBurnerCaller: BatchBurnerCaller{contract: contract}, BatchBurnerTransactor: BatchBurnerTransactor{contract: contract}, BatchBurnerFilterer: BatchBurnerFilterer{contract: contract}}, nil
}

// BatchBurner is an auto generated Go binding around an Ethereum contract.
type BatchBurner struct {
	BatchBurnerCaller     // Read-only binding to the contract
	BatchBurnerTransactor // Write-only binding to the contract
	BatchBurnerFilterer   // Log filterer for contract events
}

// BatchBurnerCaller is an auto generated read-only Go binding around an Ethereum contract.
type BatchBurnerCaller struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// BatchBurnerTransactor is an auto generated write-only Go binding around an Ethereum contract.
type BatchBurnerTransactor struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// BatchBurnerFilterer is an auto generated log filtering Go binding around an Ethereum contract events.
type BatchBurnerFilterer struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// BatchBurnerSession is an auto generated Go binding around an Ethereum contract,
// with pre-set call and transact options.
type BatchBurnerSession struct {
	Contract     *BatchBurner      // Generic contract binding to set the session for
	CallOpts     bind.CallOpts     // Call options to use throughout this session
	TransactOpts bind.TransactOpts // Transaction auth options to use throughout this session
}

// BatchBurnerCallerSession is an auto generated read-only Go binding around an Ethereum contract,
// with pre-set call options.
type BatchBurnerCallerSession struct {
	Contract *BatchBurnerCaller // Generic contract caller binding to set the session for
	CallOpts bind.CallOpts      // Call options to use throughout this session
}

// BatchBurnerTransactorSession is an auto generated write-only Go binding around an Ethereum contract,
// with pre-set transact options.
type BatchBurnerTransactorSession struct {
	Contract     *BatchBurnerTransactor // Generic contract transactor binding to set the session for
	TransactOpts bind.TransactOpts      // Transaction auth options to use throughout this session
}

// BatchBurnerRaw is an auto generated low-level Go binding around an Ethereum contract.
type BatchBurnerRaw struct {
	Contract *BatchBurner // Generic contract binding to access the raw methods on
}

// BatchBurnerCallerRaw is an auto generated low-level read-only Go binding around an Ethereum contract.
type BatchBurnerCallerRaw struct {
	Contract *BatchBurnerCaller // Generic read-only contract binding to access the raw methods on
}

// BatchBurnerTransactorRaw is an auto generated low-level write-only Go binding around an Ethereum contract.
type BatchBurnerTransactorRaw struct {
	Contract *BatchBurnerTransactor // Generic write-only contract binding to access the raw methods on
}

// NewBatchBurner creates a new instance of BatchBurner, bound to a specific deployed contract.
func NewBatchBurner(address common.Address, backend bind.ContractBackend) (*BatchBurner, error) {
	contract, err := bindBatchBurner(address, backend, backend, backend)
	if err != nil {
		return nil, err
	}
	return &BatchBurner{BatchBurnerCaller: BatchBurnerCaller{contract: contract}, BatchBurnerTransactor: BatchBurnerTransactor{contract: contract}, BatchBurnerFilterer: BatchBurnerFilterer{contract: contract}}, nil
}

// NewBatchBurnerCaller creates a new read-only instance of BatchBurner, bound to a specific deployed contract.
func NewBatchBurnerCaller(address common.Address, caller bind.ContractCaller) (*BatchBurnerCaller, error) {
	contract, err := bindBatchBurner(address, caller, nil, nil)
	if err != nil {
		return nil, err
	}
	return &BatchBurnerCaller{contract: contract}, nil
}

// NewBatchBurnerTransactor creates a new write-only instance of BatchBurner, bound to a specific deployed contract.
func NewBatchBurnerTransactor(address common.Address, transactor bind.ContractTransactor) (*BatchBurnerTransactor, error) {
	contract, err := bindBatchBurner(address, nil, transactor, nil)
	if err != nil {
		return nil, err
	}
	return &BatchBurnerTransactor{contract: contract}, nil
}

// NewBatchBurnerFilterer creates a new log filterer instance of BatchBurner, bound to a specific deployed contract.
func NewBatchBurnerFilterer(address common.Address, filterer bind.ContractFilterer) (*BatchBurnerFilterer, error) {
	contract, err := bindBatchBurner(address, nil, nil, filterer)
	if err != nil {
		return nil, err
	}
	return &BatchBurnerFilterer{contract: contract}, nil
}

// bindBatchBurner binds a generic wrapper to an already deployed contract.
func bindBatchBurner(address common.Address, caller bind.ContractCaller, transactor bind.ContractTransactor, filterer bind.ContractFilterer) (*bind.BoundContract, error) {
	parsed, err := BatchBurnerMetaData.GetAbi()
	if err != nil {
		return nil, err
	}
	return bind.NewBoundContract(address, *parsed, caller, transactor, filterer), nil
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_BatchBurner *BatchBurnerRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _BatchBurner.Contract.BatchBurnerCaller.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_BatchBurner *BatchBurnerRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _BatchBurner.Contract.BatchBurnerTransactor.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_BatchBurner *BatchBurnerRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _BatchBurner.Contract.BatchBurnerTransactor.contract.Transact(opts, method, params...)
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_BatchBurner *BatchBurnerCallerRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _BatchBurner.Contract.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_BatchBurner *BatchBurnerTransactorRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _BatchBurner.Contract.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_BatchBurner *BatchBurnerTransactorRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _BatchBurner.Contract.contract.Transact(opts, method, params...)
}

// Burner is a free data retrieval call binding the contract method 0x27810b6e.
//
// Solidity: function burner() view returns(address)
func (_BatchBurner *BatchBurnerCaller) Burner(opts *bind.CallOpts) (common.Address, error) {
	var out []interface{}
	err := _BatchBurner.contract.Call(opts, &out, "burner")

	if err != nil {
		return *new(common.Address), err
	}

	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)

	return out0, err

}

// Burner is a free data retrieval call binding the contract method 0x27810b6e.
//
// Solidity: function burner() view returns(address)
func (_BatchBurner *BatchBurnerSession) Burner() (common.Address, error) {
	return _BatchBurner.Contract.Burner(&_BatchBurner.CallOpts)
}

// Burner is a free data retrieval call binding the contract method 0x27810b6e.
//
// Solidity: function burner() view returns(address)
func (_BatchBurner *BatchBurnerCallerSession) Burner() (common.Address, error) {
	return _BatchBurner.Contract.Burner(&_BatchBurner.CallOpts)
}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_BatchBurner *BatchBurnerCaller) Token(opts *bind.CallOpts) (common.Address, error) {
	var out []interface{}
	err := _BatchBurner.contract.Call(opts, &out, "token")

	if err != nil {
		return *new(common.Address), err
	}

	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)

	return out0, err

}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_BatchBurner *BatchBurnerSession) Token() (common.Address, error) {
	return _BatchBurner.Contract.Token(&_BatchBurner.CallOpts)
}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_BatchBurner *BatchBurnerCallerSession) Token() (common.Address, error) {
	return _BatchBurner.Contract.Token(&_BatchBurner.CallOpts)
}

// BurnMany is a paid mutator transaction binding the contract method 0x0274181d.
//
// Solidity: function burnMany(uint256[] amounts, bytes32[] digests) returns()
func (_BatchBurner *BatchBurnerTransactor) BurnMany(opts *bind.TransactOpts, amounts []*big.Int, digests [][32]byte) (*types.Transaction, error) {
	return _BatchBurner.contract.Transact(opts, "burnMany", amounts, digests)
}

// BurnMany is a paid mutator transaction binding the contract method 0x0274181d.
//
// Solidity: function burnMany(uint256[] amounts, bytes32[] digests) returns()
func (_BatchBurner *BatchBurnerSession) BurnMany(amounts []*big.Int, digests [][32]byte) (*types.Transaction, error) {
	return _BatchBurner.Contract.BurnMany(&_BatchBurner.TransactOpts, amounts, digests)
}

// BurnMany is a paid mutator transaction binding the contract method 0x0274181d.
//
// Solidity: function burnMany(uint256[] amounts, bytes32[] digests) returns()
func (_BatchBurner *BatchBurnerTransactorSession) BurnMany(amounts []*big.Int, digests [][32]byte) (*types.Transaction, error) {
	return _BatchBurner.Contract.BurnMany(&_BatchBurner.TransactOpts, amounts, digests)
}

// BurnTwice is a paid mutator transaction binding the contract method 0xdbc55dd6.
//
// Solidity: function burnTwice(uint256 amount1, bytes32 digest1, uint256 amount2, bytes32 digest2) returns()
func (_BatchBurner *BatchBurnerTransactor) BurnTwice(opts *bind.TransactOpts, amount1 *big.Int, digest1 [32]byte, amount2 *big.Int, digest2 [32]byte) (*types.Transaction, error) {
	return _BatchBurner.contract.Transact(opts, "burnTwice", amount1, digest1, amount2, digest2)
}

// BurnTwice is a paid mutator transaction binding the contract method 0xdbc55dd6.
//
// Solidity: function burnTwice(uint256 amount1, bytes32 digest1, uint256 amount2, bytes32 digest2) returns()
func (_BatchBurner *BatchBurnerSession) BurnTwice(amount1 *big.Int, digest1 [32]byte, amount2 *big.Int, digest2 [32]byte) (*types.Transaction, error) {
	return _BatchBurner.Contract.BurnTwice(&_BatchBurner.TransactOpts, amount1, digest1, amount2, digest2)
}

// BurnTwice is a paid mutator transaction binding the contract method 0xdbc55dd6.
//
// Solidity: function burnTwice(uint256 amount1, bytes32 digest1, uint256 amount2, bytes32 digest2) returns()
func (_BatchBurner *BatchBurnerTransactorSession) BurnTwice(amount1 *big.Int, digest1 [32]byte, amount2 *big.Int, digest2 [32]byte) (*types.Transaction, error) {
	return _BatchBurner.Contract.BurnTwice(&_BatchBurner.TransactOpts, amount1, digest1, amount2, digest2)
}
