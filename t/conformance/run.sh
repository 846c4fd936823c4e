#!/usr/bin/env bash
# Run the official MCP conformance suite's server scenarios
# (@modelcontextprotocol/conformance 0.1.16, on the Node 22 from node_modules)
# against an MCP server URL and print one line per scenario:
#   PASS <scenario>
#   FAIL <scenario>: <reason>
# then `summary: N passed, M failed`.
#
# usage: t/conformance/run.sh URL [run.sh options] [conformance server options]
#   run.sh options (consumed here):
#     -H 'Name: value'   add a header to every request (repeatable). The suite
#                        itself cannot send custom headers, so this starts
#                        auth_proxy.mjs on an ephemeral loopback port and points
#                        the suite at it (same path as URL).
#     --bearer KEY       shorthand for -H 'Authorization: Bearer KEY'
#                        (env AUTH_BEARER does the same)
#     --rewrite-host     passed to auth_proxy.mjs (default: Host kept as sent)
#   everything else is passed to `conformance server`, e.g.
#     --scenario tools-list | --suite all|active|pending | --spec-version 2025-06-18
#     --expected-failures FILE | --verbose
# env:
#   CONFORMANCE_OUT_DIR  where checks.json files and suite.log go
#                        (default: a new mktemp -d directory)
#   CONFORMANCE_TIMEOUT_S  hard limit for the whole suite run (default 900)
#   CONFORMANCE_QUIET=1  do not echo the suite's own output (it is in suite.log)
# exit: 0 when the suite ran (whatever the verdicts), non-zero when it could
# not run (2: usage/setup, 3: no scenario result, 4: suite timed out).
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
url="${1:-}"
if [[ -z "$url" || "$url" == -* ]]; then
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
shift

headers=()
rewrite=()
pass=()
while (($#)); do
  case "$1" in
    -H|--header) headers+=("$2"); shift 2 ;;
    --bearer) headers+=("Authorization: Bearer $2"); shift 2 ;;
    --rewrite-host) rewrite=(--rewrite-host); shift ;;
    *) pass+=("$1"); shift ;;
  esac
done
[[ -n "${AUTH_BEARER:-}" ]] && headers+=("Authorization: Bearer ${AUTH_BEARER}")

node="$here/node_modules/node/bin/node"
cli="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [[ ! -x "$node" || ! -f "$cli" ]]; then
  echo "run.sh: installing pinned packages in $here" >&2
  (cd "$here" && if [[ -f package-lock.json ]]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi) >&2 \
    || { echo "run.sh: npm install failed" >&2; exit 2; }
fi
ver="$("$node" --version 2>/dev/null)" || { echo "run.sh: $node does not run" >&2; exit 2; }
[[ "$ver" == v22.* ]] || { echo "run.sh: expected Node 22, got $ver" >&2; exit 2; }

out="${CONFORMANCE_OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mcp-conformance.XXXXXX")}"
mkdir -p "$out"
suite_log="$out/suite.log"

proxy_pid=""
cleanup() {
  if [[ -n "$proxy_pid" ]]; then kill "$proxy_pid" 2>/dev/null; wait "$proxy_pid" 2>/dev/null; fi
  [[ -n "${proxy_fifo:-}" ]] && rm -f "$proxy_fifo"
}
trap cleanup EXIT

target="$url"
if ((${#headers[@]})); then
  # start auth_proxy.mjs: upstream = URL's origin, suite URL = proxy origin + URL's path
  hargs=()
  for h in "${headers[@]}"; do hargs+=(-H "$h"); done
  origin="$("$node" -e 'console.log(new URL(process.argv[1]).origin)' "$url")" || exit 2
  rest="$("$node" -e 'const u=new URL(process.argv[1]); console.log(u.pathname+u.search)' "$url")"
  proxy_out="$out/auth_proxy.port"
  MOCK_IGNORE_STDIN=1 "$node" "$here/auth_proxy.mjs" --upstream "$origin" "${hargs[@]}" "${rewrite[@]}" \
    >"$proxy_out" 2>"$out/auth_proxy.log" </dev/null &
  proxy_pid=$!
  port=""
  for _ in $(seq 1 100); do
    port="$(head -n1 "$proxy_out" 2>/dev/null | sed -n 's/^{"port":\([0-9]*\)}$/\1/p')"
    [[ -n "$port" ]] && break
    kill -0 "$proxy_pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$port" ]] || { echo "run.sh: auth_proxy did not start:" >&2; cat "$out/auth_proxy.log" >&2; exit 2; }
  # keep the URL's host spelling (localhost / 127.0.0.1 / [::1]) for the dns-rebinding scenario
  target="$("$node" -e 'const u=new URL(process.argv[1]); u.port=process.argv[2]; if(u.hostname!=="localhost"&&u.hostname!=="[::1]") u.hostname="127.0.0.1"; u.protocol="http:"; console.log(u.toString())' "$url" "$port")"
  echo "run.sh: suite -> auth_proxy $target -> $origin (adding ${#headers[@]} header(s))" >&2
fi

echo "run.sh: node $ver, conformance $("$node" "$cli" --version), url $target, results in $out" >&2
start=$(date +%s.%N)
if [[ "${CONFORMANCE_QUIET:-0}" == 1 ]]; then
  timeout --kill-after=10 "${CONFORMANCE_TIMEOUT_S:-900}" \
    "$node" "$cli" server --url "$target" -o "$out" "${pass[@]}" >"$suite_log" 2>&1 </dev/null
  rc=$?
else
  timeout --kill-after=10 "${CONFORMANCE_TIMEOUT_S:-900}" \
    "$node" "$cli" server --url "$target" -o "$out" "${pass[@]}" </dev/null 2>&1 | tee "$suite_log" >&2
  rc=$?
fi
end=$(date +%s.%N)
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')

echo "run.sh: suite exit code $rc after ${elapsed}s" >&2
SUMMARY_NOTE="elapsed: ${elapsed}s (suite exit $rc; results $out)" \
  "$node" "$here/summarize.mjs" "$out" "$suite_log"
srs=$?
if ((rc == 124 || rc == 137)); then
  echo "run.sh: the suite timed out after ${CONFORMANCE_TIMEOUT_S:-900}s" >&2
  exit 4
fi
if ((srs != 0)); then
  echo "run.sh: no scenario results (suite could not run); last lines of $suite_log:" >&2
  tail -n 15 "$suite_log" >&2
  exit 3
fi
exit 0
