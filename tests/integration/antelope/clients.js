// Runs Antelope's own clients against a BoR node and prints, as one JSON line, what each
// call gave: {"wharfkit": {call: {ok, value | error, status}}, "eosjs": {...}}.
// Usage: node clients.js URL ACCOUNT (tests/integration/api/test_antelope_clients.py).
'use strict'

const {APIClient, FetchProvider} = require('@wharfkit/antelope')
const {JsonRpc} = require('eosjs')

const [url, account] = process.argv.slice(2)

async function attempt(call) {
    try {
        const value = await call()
        return {ok: true, value: JSON.parse(JSON.stringify(value))}
    } catch (err) {
        const status = err.response ? err.response.status : err.json ? err.json.code : null
        return {ok: false, error: String(err.message || err), status}
    }
}

async function wharfkit() {
    const chain = new APIClient({provider: new FetchProvider(url, {fetch})}).v1.chain
    return {
        get_info: await attempt(() => chain.get_info()),
        get_block: await attempt(() => chain.get_block(1)),
        get_account: await attempt(() => chain.get_account(account)),
        get_abi: await attempt(() => chain.get_abi(account)),
        get_code: await attempt(() => chain.get_code(account)),
        get_currency_balance: await attempt(() =>
            chain.get_currency_balance('eosio.token', account, 'BOR')
        ),
        get_currency_stats: await attempt(() => chain.get_currency_stats('eosio.token', 'BOR')),
    }
}

async function eosjs() {
    const rpc = new JsonRpc(url, {fetch})
    return {
        get_info: await attempt(() => rpc.get_info()),
        get_block: await attempt(() => rpc.get_block(1)),
        get_account: await attempt(() => rpc.get_account(account)),
        get_abi: await attempt(() => rpc.get_abi(account)),
        get_code: await attempt(() => rpc.get_code(account)),
        get_currency_balance: await attempt(() =>
            rpc.get_currency_balance('eosio.token', account, 'BOR')
        ),
        get_currency_stats: await attempt(() => rpc.get_currency_stats('eosio.token', 'BOR')),
    }
}

async function main() {
    console.log(JSON.stringify({wharfkit: await wharfkit(), eosjs: await eosjs()}))
}

main().catch((err) => {
    console.error(err)
    process.exit(1)
})
