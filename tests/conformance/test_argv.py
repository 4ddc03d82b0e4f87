"""Every argv the role renders for a shipped inventory, and every SGLang flag the docs and hints name, against the
real 0.5.23 parser (sglang_release.parse: the release's own ServerArgs.add_cli_args, prog "sglang serve")."""

import concurrent.futures
import os
import re
import shutil
import sys
import tempfile

import pytest
import yaml

import render_argv
import sglang_release

ROOT = sglang_release.ROOT

# (inventory sources, extra vars) -> the (host, instance) pairs deploy_k26.yml deploys there; each must render.
# The example inventories take their API key from a vaulted variable the operator adds (vault_sglang_api_key); a
# stand-in value plays it here, as an extra var would.
VAULT = {'vault_sglang_api_key': 'conformance-stand-in-key'}
CASES = {
    'ct200': ((['inventories/ct200'], VAULT), {('ct200-01', 'sglang-k26'), ('ct200-02', 'sglang-k26')}),
    # k26_servers holds the TP16 group too (one unit of the rollout, module_utils/rollout/rollout_plan.py)
    'b300': ((['inventories/b300'], VAULT), {('b300-01', 'sglang-k26-ddtree'), ('b300-02', 'sglang-k26-ddtree'),
                                             ('b300-03', 'sglang-k26'), ('b300-04', 'sglang-k26')}),
    'b300-tp16': ((['inventories/b300'], dict(VAULT, k26_hosts='k26_tp16')),
                  {('b300-03', 'sglang-k26'), ('b300-04', 'sglang-k26')}),
    'local': (None, {('gpu-01', 'sglang-k26'), ('gpu-02', 'sglang-k26')}),
}


def _local_inventory(tmp):
    """inventories/local as `make fleet-up` completes it: the committed k26.yml and group_vars plus a hosts.yml
    (here a made-up two-host one; the fleet's own connection details do not reach the argv)."""
    inventory = os.path.join(tmp, 'local')
    os.mkdir(inventory)
    local = os.path.join(ROOT, 'inventories', 'local')
    shutil.copy(os.path.join(local, 'k26.yml'), inventory)
    shutil.copytree(os.path.join(local, 'group_vars'), os.path.join(inventory, 'group_vars'))
    hosts = {'all': {'children': {'local_fleet': {
        'vars': {'fleet_mirror_url': 'http://10.231.0.1:8080'},
        'hosts': {'gpu-01': {'ansible_host': '10.231.0.11'}, 'gpu-02': {'ansible_host': '10.231.0.12'}}}}}}
    with open(os.path.join(inventory, 'hosts.yml'), 'w') as handle:
        yaml.safe_dump(hosts, handle)
    return inventory


@pytest.fixture(scope='module')
def rendered():
    """{case: {(host, instance): {'argv': [...], 'command': [...]}}}, rendered by ansible-playbook once per case."""
    with tempfile.TemporaryDirectory(prefix='conformance-inv-') as tmp:
        local = _local_inventory(tmp)
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(CASES)) as pool:
            futures = {case: pool.submit(render_argv.render, *(spec if spec else ([local], {})))
                       for case, (spec, _expected) in CASES.items()}
            return {case: future.result() for case, future in futures.items()}


@pytest.mark.parametrize('case', sorted(CASES))
def test_every_rendered_argv_parses_with_the_real_parser(release, rendered, case):
    assert set(rendered[case]) == CASES[case][1]
    for (host, instance), item in sorted(rendered[case].items()):
        result = release.parse(item['argv'])
        assert result.ok, '%s %s: %s\n%s' % (host, instance, item['argv'], result.error.splitlines()[-1:])
        # The unit runs the launcher then exactly this argv (vars/main.yml __sglang_command).
        assert item['command'][-len(item['argv']):] == item['argv']
        # No argv word may be an abbreviation: argparse accepts a unique prefix today and rejects it as ambiguous
        # the day a release adds a longer flag (--cuda-graph-max-bs in 0.5.23).
        options = {opt for row in release.flag_table() for opt in row['option_strings']}
        flags = [word.split('=', 1)[0] for word in item['argv'] if word.startswith('--')]
        assert [flag for flag in flags if flag not in options] == [], (host, instance)
        deprecated = {opt for row in release.flag_table() if row['deprecated'] for opt in row['option_strings']}
        assert [flag for flag in flags if flag in deprecated] == [], (host, instance)


@pytest.mark.parametrize('case', ['ct200', 'b300', 'b300-tp16'])
def test_the_example_inventories_key_their_servers_through_the_shim(rendered, case):
    # They bind 0.0.0.0, which the role refuses without a key; the key reaches SGLang through the launcher shim only.
    for (host, instance), item in sorted(rendered[case].items()):
        assert '--host' in item['argv'] and item['argv'][item['argv'].index('--host') + 1] == '0.0.0.0'
        assert item['command'][1] == '/usr/local/lib/llmops-sglang/sglang_launch.py', (host, instance)
        assert not [word for word in item['command'] if VAULT['vault_sglang_api_key'] in word], (host, instance)


def test_multinode_ranks_render_as_one_server(rendered):
    ranks = {host: release_ns(item['argv']) for (host, _instance), item in rendered['b300-tp16'].items()}
    assert {host: ns.node_rank for host, ns in ranks.items()} == {'b300-03': 0, 'b300-04': 1}
    assert {ns.nnodes for ns in ranks.values()} == {2} and {ns.tp_size for ns in ranks.values()} == {16}
    assert {ns.dist_init_addr for ns in ranks.values()} == {'198.51.100.30:50000'}


def release_ns(argv):
    result = sglang_release.parse(argv)
    assert result.ok, result.error
    return result.namespace


def test_reserved_flags_cover_every_spelling_of_the_flags_the_role_sets(release):
    # roles/server/vars/main.yml __sglang_reserved_flags refuses these in sglang_server_args; an alias the table
    # misses (--tensor-parallel-size for --tp-size) would slip past it and silently override the role's value.
    with open(os.path.join(ROOT, 'roles', 'server', 'vars', 'main.yml')) as handle:
        reserved = yaml.safe_load(handle)['__sglang_reserved_flags']
    parser = release.real_parser()
    dests = set()
    for flag in reserved:
        matches = [action for action in parser._actions if any(
            opt == '--' + flag or opt.startswith('--' + flag) for opt in action.option_strings)]
        exact = [action for action in matches if '--' + flag in action.option_strings]
        assert exact or len(matches) == 1, '--%s is neither a flag nor a unique abbreviation of one' % flag
        dests.add((exact or matches)[0].dest)
    spellings = {opt[2:] for action in parser._actions if action.dest in dests for opt in action.option_strings}
    assert sorted(spellings - set(reserved)) == []


# ---- flags the docs and hints recommend --------------------------------------------------------------------------

# Not SGLang's: journalctl's, pip's and ansible-playbook's options, node_exporter's --collector.*, nvidia-smi's,
# huggingface-cli's --local-dir, rsync's --append; dpkg-query's --showformat, apt-get's --reinstall, dpkg's
# --force-confmiss, node_exporter's --no-collector.* (and the docs' `--no-...`), sglang-router's --worker-urls (in
# docs/benchmarks.md's router section); and `--tp`, the docs' example of an abbreviation the role refuses (it is not a flag).
OTHER_TOOLS = {'--since', '--no-pager', '--show-cursor', '--no-deps', '--no-index', '--check', '--diff',
               '--find-links', '--trusted-host', '--index-url', '--tags', '--limit', '--extra-vars',
               '--collector', '--query-gpu', '--version', '--local-dir', '--tp', '--append',
               '--showformat', '--reinstall', '--force-confmiss', '--no-collector', '--no', '--worker-urls',
               # ansible-runner's (docs/conventions.md, running a job in the execution environment's image)
               '--process-isolation', '--process-isolation-executable', '--container-image'}


def _bench_options():
    """bench/run.py's own options (--only, --skip, ...) and bench/distribution.py's (--hosts, --mib, ...), read off
    their parsers: the README and docs/model-sync.md name them too."""
    sys.path[:0] = [ROOT, os.path.join(ROOT, 'tests')]
    try:
        from bench.cli import build_parser
        from bench.distribution import build_parser as distribution_parser
    finally:
        del sys.path[:2]
    return {opt for parser in (build_parser(), distribution_parser()) for action in parser._actions
            for opt in action.option_strings}


OTHER_TOOLS |= _bench_options()
# docs/router.md names sglang-router's options (read off the real 0.3.2 binary), not SGLang's.
NOT_SGLANG_DOCS = {'router.md'}
DOCS = ['README.md', 'roles/server/defaults/main.yml', 'roles/server/meta/argument_specs.yml'] + sorted(
    os.path.join('docs', name) for name in os.listdir(os.path.join(ROOT, 'docs'))
    if name.endswith('.md') and name not in NOT_SGLANG_DOCS)
QUOTED_ERROR = re.compile(r'`[^`]*error:[^`]*`')
FLAG = re.compile(r'(?<![A-Za-z0-9_-])--[a-z][a-z0-9-]*[a-z0-9]')


def _hint_texts():
    from ansible_collections.llmops.sglang.plugins.module_utils import sglang_signatures as table
    texts = [('phase %s' % phase.name, phase.stall_hint) for phase in table.PHASES]
    texts += [('signature %s' % sig.name, sig.hint) for sig in table.FATAL_SIGNATURES]
    return texts


def _doc_flags():
    found = []
    for path in DOCS:
        with open(os.path.join(ROOT, path), encoding='utf-8') as handle:
            for number, line in enumerate(handle, 1):
                # a quoted error message (`... error: ambiguous option: --x ...`) shows a flag, it does not recommend it
                line = QUOTED_ERROR.sub('', line)
                found += [('%s:%d' % (path, number), flag) for flag in FLAG.findall(line) if flag not in OTHER_TOOLS]
    return found


def test_the_docs_name_sglang_flags_at_all():
    assert len(_doc_flags()) >= 5  # the scan works: README and docs name --mem-fraction-static, --api-key, ...


@pytest.mark.parametrize('where,flag', _doc_flags())
def test_every_flag_the_docs_name_is_a_real_current_flag(release, where, flag):
    rows = [row for row in release.flag_table() if flag in row['option_strings']]
    assert rows, '%s names %s: not a flag of sglang %s' % (where, flag, release.release())
    assert not rows[0]['deprecated'], '%s recommends %s: deprecated in %s' % (where, flag, release.release())


@pytest.mark.parametrize('where,text', _hint_texts())
def test_every_flag_a_hint_names_is_a_real_current_flag(release, where, text):
    for flag in FLAG.findall(text):
        rows = [row for row in release.flag_table() if flag in row['option_strings']]
        assert rows, '%s hint names %s: not a flag of sglang %s' % (where, flag, release.release())
        assert not rows[0]['deprecated'], '%s hint names %s: deprecated in %s' % (where, flag, release.release())
