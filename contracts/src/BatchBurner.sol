// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import "./BurnWithDigest.sol";

/// @title BatchBurner
/// @notice Test only: burns several times in one transaction, so one
/// transaction carries several LogBurnWithDigest logs. The burns' payer is this
/// contract, which first pulls the total from the caller.
contract BatchBurner {
    IERC20 public immutable token;
    BurnWithDigest public immutable burner;

    constructor(IERC20 token_, BurnWithDigest burner_) {
        token = token_;
        burner = burner_;
    }

    /// @notice Two burns in one transaction.
    function burnTwice(uint256 amount1, bytes32 digest1, uint256 amount2, bytes32 digest2) external {
        _pull(amount1 + amount2);
        burner.burnWithDigest(amount1, digest1);
        burner.burnWithDigest(amount2, digest2);
    }

    /// @notice One burn per (amount, digest) pair in one transaction, for seeding many logs cheaply.
    function burnMany(uint256[] calldata amounts, bytes32[] calldata digests) external {
        require(amounts.length == digests.length, "length mismatch");
        uint256 total;
        for (uint256 i = 0; i < amounts.length; i++) {
            total += amounts[i];
        }
        _pull(total);
        for (uint256 i = 0; i < amounts.length; i++) {
            burner.burnWithDigest(amounts[i], digests[i]);
        }
    }

    function _pull(uint256 total) private {
        require(token.transferFrom(msg.sender, address(this), total), "transferFrom failed");
        require(token.approve(address(burner), total), "approve failed");
    }
}
