// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title EventImpostor
/// @notice Test only: emits the same LogBurnWithDigest event as BurnWithDigest
/// without burning anything. A poller that credits these is broken.
contract EventImpostor {
    event LogBurnWithDigest(address indexed payer, uint256 amount, bytes32 indexed digest, uint256 timestamp);

    function fakeBurn(uint256 amount, bytes32 digest) external {
        emit LogBurnWithDigest(msg.sender, amount, digest, block.timestamp);
    }
}
