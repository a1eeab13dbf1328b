// A local Solana for the SVM half of the test: litesvm (the SVM runtime with
// the SPL Token, Associated Token Account, Memo and Compute Budget programs
// built in) behind a small JSON-RPC server on loopback that answers exactly
// the methods the official @x402/svm client and facilitator call:
//   client:      getAccountInfo (the mint), getLatestBlockhash
//   facilitator: simulateTransaction, sendTransaction, getSignatureStatuses
// plus getBalance, getSlot and getTokenAccountBalance for people poking at
// it. litesvm has no blocks: "confirmed" means processed, and a blockhash
// stays valid until expireBlockhash() (what the expired case uses).
//
// A token with USDC's mint address and 6 decimals is written into the ledger
// directly (litesvm lets the test set accounts), as are the token accounts.
import http from 'node:http';
import { LiteSVM } from 'litesvm';
import {
  address,
  getAddressEncoder,
  getBase58Decoder,
  getBase58Encoder,
  getProgramDerivedAddress,
} from '@solana/kit';

export const USDC_MINT = 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v';
export const TOKEN_PROGRAM = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
const ATA_PROGRAM = 'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL';
const SOLANA_DEVNET = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1';
export const SOLANA_MAINNET = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp';
export { SOLANA_DEVNET };

const addrEnc = getAddressEncoder();
const b58 = { enc: getBase58Encoder(), dec: getBase58Decoder() };

/** The associated token account of (owner, mint) under the SPL Token program. */
export async function ata(owner, mint = USDC_MINT) {
  const [pda] = await getProgramDerivedAddress({
    programAddress: address(ATA_PROGRAM),
    seeds: [addrEnc.encode(address(owner)), addrEnc.encode(address(TOKEN_PROGRAM)), addrEnc.encode(address(mint))],
  });
  return pda;
}

// SPL Token's Mint (82 bytes) and Account (165 bytes) layouts.
function mintData({ authority, supply, decimals }) {
  const b = Buffer.alloc(82);
  b.writeUInt32LE(1, 0);
  Buffer.from(addrEnc.encode(address(authority))).copy(b, 4);
  b.writeBigUInt64LE(supply, 36);
  b.writeUInt8(decimals, 44);
  b.writeUInt8(1, 45); // is_initialized; no freeze authority
  return b;
}
function tokenAccountData({ mint, owner, amount }) {
  const b = Buffer.alloc(165);
  Buffer.from(addrEnc.encode(address(mint))).copy(b, 0);
  Buffer.from(addrEnc.encode(address(owner))).copy(b, 32);
  b.writeBigUInt64LE(amount, 64);
  b.writeUInt8(1, 108); // state: initialized
  return b;
}

// litesvm's errors are napi values: a bare number for a fieldless variant
// (its TypeScript const enums, which have no runtime object), or a class
// instance. errJson writes them the way a Solana node does, e.g.
// "BlockhashNotFound" or {"InstructionError":[2,{"Custom":1}]}.
const TX_ERRORS = ('AccountInUse AccountLoadedTwice AccountNotFound ProgramAccountNotFound InsufficientFundsForFee ' +
  'InvalidAccountForFee AlreadyProcessed BlockhashNotFound CallChainTooDeep MissingSignatureForFee InvalidAccountIndex ' +
  'SignatureFailure InvalidProgramForExecution SanitizeFailure ClusterMaintenance AccountBorrowOutstanding ' +
  'WouldExceedMaxBlockCostLimit UnsupportedVersion InvalidWritableAccount WouldExceedMaxAccountCostLimit ' +
  'WouldExceedAccountDataBlockLimit TooManyAccountLocks AddressLookupTableNotFound InvalidAddressLookupTableOwner ' +
  'InvalidAddressLookupTableData InvalidAddressLookupTableIndex InvalidRentPayingAccount WouldExceedMaxVoteCostLimit ' +
  'WouldExceedAccountDataTotalLimit MaxLoadedAccountsDataSizeExceeded ResanitizationNeeded ' +
  'InvalidLoadedAccountsDataSizeLimit UnbalancedTransaction ProgramCacheHitMaxLimit CommitCancelled').split(' ');
const IX_ERRORS = ('GenericError InvalidArgument InvalidInstructionData InvalidAccountData AccountDataTooSmall ' +
  'InsufficientFunds IncorrectProgramId MissingRequiredSignature AccountAlreadyInitialized UninitializedAccount ' +
  'UnbalancedInstruction ModifiedProgramId ExternalAccountLamportSpend ExternalAccountDataModified ' +
  'ReadonlyLamportChange ReadonlyDataModified DuplicateAccountIndex ExecutableModified RentEpochModified ' +
  'NotEnoughAccountKeys AccountDataSizeChanged AccountNotExecutable AccountBorrowFailed AccountBorrowOutstanding ' +
  'DuplicateAccountOutOfSync InvalidError ExecutableDataModified ExecutableLamportChange ' +
  'ExecutableAccountNotRentExempt UnsupportedProgramId CallDepth MissingAccount ReentrancyNotAllowed ' +
  'MaxSeedLengthExceeded InvalidSeeds InvalidRealloc ComputationalBudgetExceeded PrivilegeEscalation ' +
  'ProgramEnvironmentSetupFailure ProgramFailedToComplete ProgramFailedToCompile Immutable IncorrectAuthority ' +
  'AccountNotRentExempt InvalidAccountOwner ArithmeticOverflow UnsupportedSysvar IllegalOwner ' +
  'MaxAccountsDataAllocationsExceeded MaxAccountsExceeded MaxInstructionTraceLengthExceeded ' +
  'BuiltinProgramsMustConsumeComputeUnits').split(' ');
function errJson(failed) {
  const e = failed.err();
  if (typeof e === 'number') return TX_ERRORS[e] ?? `TransactionError${e}`;
  if (e && typeof e.index === 'number' && typeof e.err === 'function') {
    const inner = e.err();
    if (typeof inner === 'number') return { InstructionError: [e.index, IX_ERRORS[inner] ?? `InstructionError${inner}`] };
    if (inner && typeof inner.code === 'number') return { InstructionError: [e.index, { Custom: inner.code }] };
    return { InstructionError: [e.index, String(inner)] };
  }
  return String(e?.toString?.() ?? failed);
}

export async function startSvm() {
  const svm = new LiteSVM();
  const inner = svm.inner;
  const statuses = new Map(); // signature -> { slot, err }
  const rpcCalls = [];

  const rent = (len) => svm.minimumBalanceForRentExemption(BigInt(len));
  const setAccount = (addr, data, owner) => svm.setAccount({
    address: address(addr), data: new Uint8Array(data), executable: false,
    lamports: rent(data.length), programAddress: address(owner), space: BigInt(data.length),
  });
  const slot = () => Number(inner.getClock().slot);

  const ctx = {
    svm,
    rpcCalls,
    /** Writes the USDC-like mint (6 decimals) at USDC_MINT. */
    createMint(authority, supply = 0n) {
      setAccount(USDC_MINT, mintData({ authority, supply, decimals: 6 }), TOKEN_PROGRAM);
    },
    /** Writes owner's associated token account holding amount; returns its address. */
    async fundToken(owner, amount) {
      const a = await ata(owner);
      setAccount(a, tokenAccountData({ mint: USDC_MINT, owner, amount }), TOKEN_PROGRAM);
      return a;
    },
    /** owner's token balance in atomic units, or null if it has no token account. */
    async tokenBalance(owner) {
      const acc = svm.getAccount(await ata(owner));
      if (!acc.exists) return null;
      return Buffer.from(acc.data).readBigUInt64LE(64);
    },
    lamports(addr) {
      return svm.getBalance(address(addr)) ?? 0n;
    },
    airdrop(addr, lamports) {
      const r = svm.airdrop(address(addr), lamports);
      if (!r || typeof r.err === 'function') throw new Error(`airdrop failed: ${r}`);
    },
    latestBlockhash() {
      return svm.latestBlockhash();
    },
    expireBlockhash() {
      svm.expireBlockhash();
    },
    status(sig) {
      return statuses.get(sig);
    },
  };

  const methods = {
    getLatestBlockhash: () => ({
      context: { slot: slot() },
      value: { blockhash: svm.latestBlockhash(), lastValidBlockHeight: slot() + 150 },
    }),
    getSlot: () => slot(),
    getBalance: ([addr]) => ({ context: { slot: slot() }, value: Number(ctx.lamports(addr)) }),
    getAccountInfo: ([addr, opts]) => {
      const enc = opts?.encoding ?? 'base64';
      if (enc !== 'base64') throw Object.assign(new Error(`encoding ${enc} not served here`), { code: -32602 });
      const acc = svm.getAccount(address(addr));
      if (!acc.exists) return { context: { slot: slot() }, value: null };
      return {
        context: { slot: slot() },
        value: {
          data: [Buffer.from(acc.data).toString('base64'), 'base64'],
          executable: acc.executable,
          lamports: Number(acc.lamports),
          owner: acc.programAddress,
          rentEpoch: 0,
          space: acc.data.length,
        },
      };
    },
    getTokenAccountBalance: ([addr]) => {
      const acc = svm.getAccount(address(addr));
      if (!acc.exists) throw Object.assign(new Error('could not find account'), { code: -32602 });
      const amount = Buffer.from(acc.data).readBigUInt64LE(64).toString();
      return { context: { slot: slot() }, value: { amount, decimals: 6, uiAmountString: amount } };
    },
    simulateTransaction: ([tx, opts]) => {
      if (opts?.encoding !== 'base64') throw Object.assign(new Error('only base64 is served here'), { code: -32602 });
      const bytes = Buffer.from(tx, 'base64');
      const sigverify = opts?.sigVerify ?? false;
      inner.setSigverify(sigverify);
      inner.setBlockhashCheck(!opts?.replaceRecentBlockhash);
      let r;
      try {
        r = inner.simulateVersionedTransaction(bytes);
      } finally {
        inner.setSigverify(true);
        inner.setBlockhashCheck(true);
      }
      const failed = typeof r.err === 'function';
      const meta = r.meta();
      return {
        context: { slot: slot() },
        value: {
          err: failed ? errJson(r) : null,
          logs: meta.logs(),
          accounts: null,
          unitsConsumed: Number(meta.computeUnitsConsumed()),
          returnData: null,
        },
      };
    },
    sendTransaction: ([tx, opts]) => {
      if (opts?.encoding !== 'base64') throw Object.assign(new Error('only base64 is served here'), { code: -32602 });
      const bytes = Buffer.from(tx, 'base64');
      // The first signature is the fee payer's: the transaction id.
      const sig = b58.dec.decode(bytes.subarray(1, 65));
      const r = inner.sendVersionedTransaction(bytes);
      if (typeof r.err === 'function') {
        const err = errJson(r);
        // An instruction that failed lands (the fee is charged); anything
        // else (bad signature, unknown blockhash, already processed) never
        // reaches a block, and a node refuses it at once.
        if (err && typeof err === 'object' && 'InstructionError' in err) {
          statuses.set(sig, { slot: slot(), err });
          return sig;
        }
        throw Object.assign(new Error(`Transaction simulation failed: ${JSON.stringify(err)}`), { code: -32002 });
      }
      statuses.set(sig, { slot: slot(), err: null });
      return sig;
    },
    getSignatureStatuses: ([sigs]) => ({
      context: { slot: slot() },
      value: sigs.map((s) => {
        const st = statuses.get(s);
        if (!st) return null;
        return {
          slot: st.slot, confirmations: null, err: st.err,
          status: st.err ? { Err: st.err } : { Ok: null }, confirmationStatus: 'finalized',
        };
      }),
    }),
  };

  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    let msg;
    try {
      msg = JSON.parse(raw);
    } catch {
      res.writeHead(400).end();
      return;
    }
    const one = (m) => {
      rpcCalls.push(m.method);
      const fn = methods[m.method];
      if (!fn) return { jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } };
      try {
        return { jsonrpc: '2.0', id: m.id, result: fn(m.params ?? []) };
      } catch (e) {
        return { jsonrpc: '2.0', id: m.id, error: { code: e.code ?? -32603, message: String(e.message ?? e) } };
      }
    };
    const out = Array.isArray(msg) ? msg.map(one) : one(msg);
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(out));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  ctx.rpcUrl = `http://127.0.0.1:${server.address().port}`;
  ctx.stop = () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); });
  return ctx;
}

export { b58 };
