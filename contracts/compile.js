// Compiles src/*.sol with the solc version pinned in package.json and writes
// build/<Contract>.abi and build/<Contract>.bin. Run through `make contracts`.
'use strict';

const fs = require('fs');
const path = require('path');
const solc = require('solc');

const srcDir = path.join(__dirname, 'src');
const buildDir = path.join(__dirname, 'build');

const sources = {};
for (const file of fs.readdirSync(srcDir).filter((f) => f.endsWith('.sol')).sort()) {
  sources[file] = { content: fs.readFileSync(path.join(srcDir, file), 'utf8') };
}

const input = {
  language: 'Solidity',
  sources,
  settings: {
    // cancun: understood by every current EVM node, including older geth releases.
    evmVersion: 'cancun',
    optimizer: { enabled: true, runs: 200 },
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};

const output = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (output.errors || []).filter((e) => e.severity === 'error');
for (const e of output.errors || []) {
  console.error(e.formattedMessage);
}
if (errors.length > 0) {
  process.exit(1);
}

fs.mkdirSync(buildDir, { recursive: true });
const wanted = ['TestToken', 'BurnWithDigest', 'BatchBurner', 'EventImpostor'];
for (const [file, contracts] of Object.entries(output.contracts)) {
  for (const [name, artifact] of Object.entries(contracts)) {
    if (!wanted.includes(name)) continue;
    fs.writeFileSync(path.join(buildDir, `${name}.abi`), JSON.stringify(artifact.abi, null, 2) + '\n');
    fs.writeFileSync(path.join(buildDir, `${name}.bin`), artifact.evm.bytecode.object);
    console.log(`compiled ${file}:${name} with solc ${solc.version()}`);
  }
}
