// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

interface IERC20 {
    function transferFrom(address from, address to, uint256 value) external returns (bool);
    function approve(address spender, uint256 value) external returns (bool);
}

/// @title BurnWithDigest
/// @notice Accepts payment by burn: the caller's tokens go to the dead address
/// and one LogBurnWithDigest records who paid, how much, and for what digest.
contract BurnWithDigest {
    address public constant BURN_ADDRESS = 0x000000000000000000000000000000000000dEaD;

    IERC20 public immutable token;

    event LogBurnWithDigest(address indexed payer, uint256 amount, bytes32 indexed digest, uint256 timestamp);

    constructor(IERC20 token_) {
        require(address(token_) != address(0), "token is zero address");
        token = token_;
    }

    /// @notice Burns `amount` of the caller's tokens (needs an allowance) for `digest`.
    function burnWithDigest(uint256 amount, bytes32 digest) external {
        require(amount > 0, "amount is zero");
        require(digest != bytes32(0), "digest is zero");
        require(token.transferFrom(msg.sender, BURN_ADDRESS, amount), "transferFrom failed");
        emit LogBurnWithDigest(msg.sender, amount, digest, block.timestamp);
    }
}
