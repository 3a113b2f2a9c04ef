// Runs Antelope's own clients against a BoR node and prints, as one JSON line, what each
// call gave: {"wharfkit": {call: {ok, value | error, status}}, "eosjs": {...}}.
// Usage: node clients.js URL ACCOUNT CONTRACT BLOCK_NUM
// (tests/integration/api/test_antelope_clients.py): CONTRACT holds the kv table of
// tests/node/api/kv_contract.py in its own scope, BLOCK_NUM is a block with transactions.
'use strict'

const {ABI, APIClient, FetchProvider, Serializer} = require('@wharfkit/antelope')
const {JsonRpc, Serialize} = require('eosjs')

const [url, account, contract, blockNum] = process.argv.slice(2)
const TABLE = {code: contract, scope: contract, table: 'kv'}
// eosio.system's producer_info as an ABI, so that WharfKit checks every field's type (its
// APIClient has no get_producers of its own).
const PRODUCERS_ABI = ABI.from({
    version: 'eosio::abi/1.2',
    structs: [
        {
            name: 'producer_info',
            base: '',
            fields: [
                {name: 'owner', type: 'name'},
                {name: 'total_votes', type: 'float64'},
                {name: 'producer_key', type: 'public_key'},
                {name: 'is_active', type: 'bool'},
                {name: 'url', type: 'string'},
                {name: 'unpaid_blocks', type: 'uint32'},
                {name: 'last_claim_time', type: 'time_point'},
                {name: 'location', type: 'uint16'},
            ],
        },
    ],
})

async function attempt(call) {
    try {
        const value = await call()
        return {ok: true, value: JSON.parse(JSON.stringify(value))}
    } catch (err) {
        const status = err.response ? err.response.status : err.json ? err.json.code : null
        return {ok: false, error: String(err.message || err), status}
    }
}

// Every row of the table, page by page from next_key (limit 2: the table holds more).
async function pages(read) {
    const rows = []
    let lower
    for (let i = 0; i < 100; i++) {
        const page = await read(lower)
        rows.push(...page.rows)
        if (!page.more) return rows
        lower = page.next_key
    }
    throw new Error('paging did not end')
}

async function wharfkit() {
    const client = new APIClient({provider: new FetchProvider(url, {fetch})})
    const chain = client.v1.chain
    const abi = async () => ABI.from((await chain.get_abi(contract)).abi)
    return {
        get_info: await attempt(() => chain.get_info()),
        get_block: await attempt(async () => {
            const block = await chain.get_block(Number(blockNum))
            const transactions = block.transactions.map((t) => ({id: String(t.id), status: t.status}))
            return {producer_signature: String(block.producer_signature), transactions}
        }),
        get_account: await attempt(() => chain.get_account(account)),
        get_abi: await attempt(abi),
        get_code: await attempt(async () => {
            const code = await chain.get_code(contract)
            return {code_hash: code.code_hash.hexString, wasm: code.wasm, abi: code.abi}
        }),
        // Decoded by the node, then checked against the ABI by WharfKit's serializer.
        get_table_rows: await attempt(async () => {
            const types = await abi()
            const rows = await pages((lower) =>
                chain.get_table_rows({...TABLE, limit: 2, key_type: 'i64', lower_bound: lower})
            )
            return rows.map((row) => Serializer.decode({object: row, abi: types, type: 'entry'}))
        }),
        // The rows' bytes (json false), decoded by WharfKit with the ABI the node gave.
        get_table_rows_hex: await attempt(async () => {
            const types = await abi()
            const page = await chain.get_table_rows({...TABLE, json: false, limit: 100})
            return page.rows.map((hex) => Serializer.decode({data: hex, abi: types, type: 'entry'}))
        }),
        get_currency_balance: await attempt(() =>
            chain.get_currency_balance('eosio.token', account, 'BOR')
        ),
        get_currency_stats: await attempt(() => chain.get_currency_stats('eosio.token', 'BOR')),
        get_producers: await attempt(async () => {
            const params = {json: true, lower_bound: '', limit: 50}
            const answer = await client.call({path: '/v1/chain/get_producers', params})
            return {
                rows: answer.rows.map((row) =>
                    Serializer.decode({object: row, abi: PRODUCERS_ABI, type: 'producer_info'})
                ),
                total_producer_vote_weight: Number(answer.total_producer_vote_weight),
            }
        }),
    }
}

function eosjsDecode(abi, hex) {
    const types = Serialize.getTypesFromAbi(Serialize.createInitialTypes(), abi)
    const buffer = new Serialize.SerialBuffer({
        textEncoder: new TextEncoder(),
        textDecoder: new TextDecoder(),
    })
    buffer.pushArray(Serialize.hexToUint8Array(hex))
    return types.get('entry').deserialize(buffer)
}

async function eosjs() {
    const rpc = new JsonRpc(url, {fetch})
    return {
        get_info: await attempt(() => rpc.get_info()),
        get_block: await attempt(() => rpc.get_block(Number(blockNum))),
        get_account: await attempt(() => rpc.get_account(account)),
        get_abi: await attempt(() => rpc.get_abi(contract)),
        get_code: await attempt(() => rpc.get_code(contract)),
        get_table_rows: await attempt(() =>
            pages((lower) => rpc.get_table_rows({...TABLE, limit: 2, lower_bound: lower}))
        ),
        // The rows' bytes, decoded by eosjs' serializer with the ABI the node gave.
        get_table_rows_hex: await attempt(async () => {
            const {abi} = await rpc.get_abi(contract)
            const page = await rpc.get_table_rows({...TABLE, json: false, limit: 100})
            return page.rows.map((hex) => eosjsDecode(abi, hex))
        }),
        get_currency_balance: await attempt(() =>
            rpc.get_currency_balance('eosio.token', account, 'BOR')
        ),
        get_currency_stats: await attempt(() => rpc.get_currency_stats('eosio.token', 'BOR')),
        get_producers: await attempt(() => rpc.get_producers(true, '', 50)),
    }
}

async function main() {
    console.log(JSON.stringify({wharfkit: await wharfkit(), eosjs: await eosjs()}))
}

main().catch((err) => {
    console.error(err)
    process.exit(1)
})
