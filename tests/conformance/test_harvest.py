"""Every failure text of the release is classified (tests/conformance/failure_coverage.yml), and every family the
signature table claims is read right.

harvest.py reads the wheel (AST) and lists every text a `sglang serve` start or a request can print; the table says
of each whether a FATAL_SIGNATURES row reads it (`matched`), it is no failure (`benign`) or the table deliberately has
no row for it (`waived`), with why. An upgrade fails here with the list of its new texts (and of the texts gone), and
docs/reading-failures.md states the table's numbers, checked here.
"""

import os
import socket

import pytest

import harvest
from ansible_collections.llmops.sglang.plugins.module_utils import sglang_signatures as table
from ansible_collections.llmops.sglang.plugins.module_utils.wait.journal_digest import JournalDigest
from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import JournalEntry

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'docs',
                   'reading-failures.md')


@pytest.fixture(scope='module')
def texts(release):
    found = harvest.texts()
    assert len(found) > 1000, 'the harvest found only %d texts: is SCOPE still where 0.5.23 keeps its code?' % len(found)
    return found


@pytest.fixture(scope='module')
def coverage():
    return harvest.load_table()


def _entries(release):
    """(file, kind, template) -> the harvest's first entry with it (for rendering)."""
    out = {}
    for entry in harvest.harvest():
        out.setdefault(harvest.key(entry), entry)
    return out


def digest(lines):
    entries = [JournalEntry(text, 'c%d' % i, 0, 0, 'inv-1', False) for i, text in enumerate(lines)]
    result = JournalDigest()
    result.feed(entries, 0.0)
    return result


# ---- the harvest and the table agree -------------------------------------------------------------------------------

def test_the_harvest_reads_what_a_start_prints(texts):
    # A few texts every reader of a failed 0.5.23 start meets: the harvest must see them where they are.
    for where, words in (('managers/scheduler.py', 'Scheduler hit an exception: {traceback}'),
                         ('utils/watchdog.py', '{self.debug_name} watchdog timeout ('),
                         ('model_loader/weight_utils.py', 'shard file(s) missing from {hf_folder} (incomplete download?)'),
                         ('model_executor/pool_configurator.py', 'Not enough memory. Please try to increase'),
                         ('entrypoints/engine.py', 'Received sigquit from a child process.')):
        assert [k for k in texts if k[0] == where and words in k[2]], (where, words)


def test_every_harvested_text_is_classified(texts, coverage):
    _header, entries = coverage
    missing = sorted(set(texts) - set(entries))
    assert missing == [], (
        '%d failure text(s) of the release are not in tests/conformance/failure_coverage.yml: classify each '
        '(`python tests/conformance/harvest.py draft` suggests):\n' % len(missing)
        + '\n'.join('  %s:%s %s %r' % (f, texts[(f, k, t)], k, t[:160]) for f, k, t in missing))


def test_no_entry_of_the_table_is_gone_from_the_release(texts, coverage):
    _header, entries = coverage
    gone = sorted(set(entries) - set(texts))
    assert gone == [], '%d entr(y/ies) of failure_coverage.yml no longer exist in the release: remove them\n%s' % (
        len(gone), '\n'.join('  %s %s %r' % (f, k, t[:160]) for f, k, t in gone))


def test_each_entry_has_one_known_status(coverage):
    header, entries = coverage
    names = set(sig.name for sig in table.FATAL_SIGNATURES)
    reasons = header['reasons']
    assert header['release'] == table.RELEASE
    wrong = []
    for key, row in entries.items():
        statuses = [s for s in harvest.STATUSES if s in row]
        if len(statuses) != 1:
            wrong.append((key, 'statuses %r' % statuses))
        elif 'matched' in row and row['matched'] not in names:
            wrong.append((key, 'no signature %r' % row['matched']))
        elif 'matched' not in row and not reasons.get(row[statuses[0]], '').startswith(statuses[0] + ':'):
            wrong.append((key, 'no %s reason %r' % (statuses[0], row[statuses[0]])))
    assert wrong == []


def test_matched_texts_land_on_their_signature(release, coverage):
    """Each matched text, rendered as 0.5.23 prints it (sample values, log prefix), names its signature through
    match_fatal and through the waiter's digest of the journal."""
    entries = _entries(release)
    wrong = []
    for key, row in coverage[1].items():
        if 'matched' not in row or key not in entries:
            continue
        lines = harvest.render(entries[key], row.get('sample'))
        names = [getattr(table.match_fatal(line)[0], 'name', None) for line in lines]
        cause = digest(lines).cause()
        if row['matched'] not in names or cause[2] != row['matched']:
            wrong.append('%s %s %r -> %r / %r' % (key[0], key[1], lines[0][:120], names, cause[2]))
    assert wrong == [], '\n'.join(wrong)


def test_benign_and_waived_texts_match_no_signature(release, coverage):
    """A text the table calls benign or waived must not be read as a failure cause either: if a row reads it, the
    table says `matched`."""
    entries = _entries(release)
    wrong = []
    for key, row in coverage[1].items():
        if 'matched' in row or key not in entries:
            continue
        for line in harvest.render(entries[key], row.get('sample')):
            sig, _match = table.match_fatal(line)
            if sig is not None:
                wrong.append('%s %s %r matches %s' % (key[0], key[1], line[:120], sig.name))
    assert wrong == [], '\n'.join(wrong)


def test_the_docs_state_the_tables_numbers(coverage):
    with open(DOC, encoding='utf-8') as handle:
        doc = handle.read()
    block = harvest.counts_block(coverage[1])
    assert block in doc, 'docs/reading-failures.md must hold, verbatim (python tests/conformance/harvest.py counts):\n' + block


# The draft rules (harvest.suggest) that classify a new release's texts, at the places the entry-by-entry review of
# the table found them systematically wrong: each must suggest what the reviewed table says.
REVIEWED_RULES = (
    ('mem_cache/unified_cache/components/full.py', 551),       # the default cache's FULL component: not feature_off
    ('mem_cache/unified_cache/tree_core_registry.py', 185),    # its tree-core registry, run at every start
    ('mem_cache/unified_cache/unified_tree_core.py', None),    # the Python tree core, a fallback: feature_off
    ('layers/quantization/marlin_utils_fp4.py', 144),          # NVFP4 Marlin, called by compressed-tensors' W4A16 NVFP4
    ('layers/quantization/marlin_utils_fp4.py', 371),          # MXFP4 Marlin in the same file: another method
    ('managers/scheduler_components/batch_result_processor.py', 237),  # raised where nothing catches it
    ('managers/scheduler_components/batch_result_processor.py', 728),  # logged for the one request
    ('managers/io_struct.py', 2645),                           # a self-check run at import
    ('entrypoints/systemone/serving.py', 186),                 # a request handler's refusal
    ('managers/scheduler_components/internal_state.py', 153),  # the /set_internal_state request's
)


@pytest.mark.parametrize('path,line', REVIEWED_RULES)
def test_the_draft_rules_suggest_what_the_review_decided(release, coverage, path, line):
    found = [e for e in harvest.harvest() if e['file'] == path and (line is None or e['line'] == line)]
    assert found, '%s:%s holds no harvested text' % (path, line)
    for entry in found:
        row = coverage[1][harvest.key(entry)]
        status = [s for s in harvest.STATUSES if s in row][0]
        assert harvest.suggest(entry, table) == (status, row[status]), (path, entry['line'], entry['template'][:80])


# ---- the families: the release's real format strings, rendered, read by the waiter --------------------------------

def _release_text(release, path, line, samples=None):
    """The harvested text at path:line, rendered as 0.5.23 prints it (its log prefix included)."""
    found = [e for e in harvest.harvest() if e['file'] == path and e['line'] <= line <= e['end_line']]
    assert found, '%s:%d holds no harvested text' % (path, line)
    return harvest.render(found[0], samples)


def _bind_error_python():
    """OSError of a plain socket.bind on a held port (what _ReusePortMultiprocess's listeners get), for real."""
    holder = socket.socket()
    holder.bind(('127.0.0.1', 0))
    holder.listen(1)
    other = socket.socket()
    try:
        other.bind(('127.0.0.1', holder.getsockname()[1]))
    except OSError as exc:
        return 'OSError: %s' % exc
    finally:
        other.close()
        holder.close()
    raise AssertionError('binding a held port succeeded')


# family -> [(lines of one record, as journald gets them), ...]: the release's own strings rendered with the values a
# K2.6 TP8 start gives them, and the third-party texts those paths print.
FAMILIES = {
    'subprocess_exception': [
        ('managers/scheduler.py', 6372, None), ('managers/tokenizer_manager.py', 4043, None),
        ('managers/detokenizer_manager.py', 566, None), ('managers/data_parallel_controller.py', 1011, None),
        ('managers/multi_tokenizer_mixin.py', 833, None), ('managers/multi_tokenizer_mixin.py', 945, None)],
    'watchdog_timeout': [
        ('utils/watchdog.py', 154, {'self.debug_name': name}) for name in
        ('Scheduler', 'TokenizerManager', 'DetokenizerManager', 'DataParallelController')] + [
        ('entrypoints/http_server.py', 793, {'HEALTH_CHECK_TIMEOUT': '20'})],
    'subprocess_crashed': [
        ('utils/watchdog.py', 217, {'proc.exitcode': '-9'}), ('entrypoints/engine.py', 1024, {'proc.exitcode': '-6'}),
        ('managers/data_parallel_controller.py', 1007, {'proc.exitcode': '1'})],
    'not_enough_memory': [
        ('model_executor/pool_configurator.py', 99, None), ('mem_cache/kv_cache_configurator.py', 3051, None),
        ('model_executor/pool_configurator.py', 1026, None), ('mem_cache/allocation.py', 170, None),
        ('mem_cache/kv_cache_configurator.py', 3154, None), ('mem_cache/mamba_checkpoint_pool.py', 358, None),
        ('mem_cache/unified_memory_pool.py', 1564, {'factory': 'init_unified_swa_pools'})],
    'gpu_memory_unbalanced': [('distributed/bootstrap.py', 450, None)],
    # SGLang's own "please install": fp4_gemm of the compressed-tensors NVFP4 linear scheme, the sglang-kernel check
    # of every CUDA start (entrypoints/engine.py:1962), a loader's optional package
    'missing_package': [
        ('layers/quantization/modelopt_quant.py', 163, None),
        ('utils/common.py', 2430, {'pkg': 'sglang-kernel', 'installed_version': '0.4.1', 'min_version': '0.4.9',
                                   'message': 'Please reinstall the latest version with `pip install sglang-kernel '
                                              '--force-reinstall`'}),
        ('utils/common.py', 2435, {'pkg': 'sglang-kernel', 'min_version': '0.4.9', 'message': 'Please reinstall the '
                                   'latest version with `pip install sglang-kernel --force-reinstall`'}),
        ('model_loader/weight_utils.py', 1280, None)],
    'checkpoint_incomplete': [
        ('model_loader/weight_utils.py', 802, {'index_file': '/models/Kimi-K2.6/model.safetensors.index.json',
                                               'hf_folder': '/models/Kimi-K2.6'}),
        ('model_loader/loader.py', 581, {'model_name_or_path': '/models/Kimi-K2.6'})],
    'port_in_use': [('entrypoints/engine.py', 1196, None), ('utils/network.py', 178, None),
                    ('utils/network.py', 103, None)],
    'compressed_tensors_too_old': [('layers/quantization/compressed_tensors/compressed_tensors.py', 1004, None),
                                   ('layers/quantization/compressed_tensors/compressed_tensors.py', 862, None),
                                   ('layers/quantization/compressed_tensors/compressed_tensors.py', 423,
                                    {'min_capability': '100', 'capability': '90'})],
    'no_gpu': [('utils/common.py', 784, {'reason': 'nvidia-smi returned no GPU memory values.'}),
               ('utils/common.py', 628, None), ('utils/common.py', 1125, None)],
    'other_rank_failed': [('model_executor/model_runner_components/load_model_utils.py', 394, {'tp_rank': '5'})],
    'nccl': [('distributed/device_communicators/pynccl_wrapper.py', 474, {'error_str': 'unhandled system error'}),
             ('distributed/device_communicators/pynccl_wrapper.py', 441, None)],
    # SO_REUSEPORT workers: _reserve_reuseport_socket logs the bind's OSError with SGLang's prefix, then exits.
    'http_port_in_use': [('entrypoints/http_server.py', 2738, {'error': '[Errno 98] Address already in use'})],
}
THIRD_PARTY = {
    'http_port_in_use': [
        # uvicorn==0.54.0:uvicorn/server.py:190 logs the OSError of asyncio's create_server (test_signatures produces
        # it for real); a plain bind (the reuse-port listeners) says it with a capital A, produced here for real.
        lambda: ['ERROR:    ' + _bind_error_python().split(': ', 1)[1]], lambda: [_bind_error_python()]],
}


def _family_cases():
    for name, sources in sorted(FAMILIES.items()):
        for path, line, samples in sources:
            yield pytest.param(name, (path, line, samples), id='%s-%s:%d' % (name, path, line))
    for name, makers in sorted(THIRD_PARTY.items()):
        for index, maker in enumerate(makers):
            yield pytest.param(name, maker, id='%s-third-party-%d' % (name, index))


@pytest.mark.parametrize('name,source', list(_family_cases()))
def test_each_family_reads_with_its_cause_and_hint(release, name, source):
    """The real text of each family member, as the journal shows it, gives the family's signature, and the waiter's
    digest gives its hint (filled with the member's own words where the hint names them)."""
    lines = _release_text(release, *source) if isinstance(source, tuple) else source()
    sig = [table.match_fatal(line)[0] for line in lines]
    assert name in [s.name for s in sig if s], (lines, [s and s.name for s in sig])
    summary, hint, cause = digest(lines).cause()
    row = table.FATAL_SIGNATURES[table.signature_priority(name)]
    assert cause == name, (lines, cause)
    assert summary and hint and '{' not in hint, (summary, hint)
    if name == 'subprocess_exception':
        assert lines[0].split('] ', 1)[1].split(' hit')[0] in hint, hint
    if name == 'watchdog_timeout' and 'watchdog timeout' in lines[0]:
        assert source[2]['self.debug_name'] in hint, hint
    if name == 'subprocess_crashed':
        assert source[2]['proc.exitcode'] in hint, hint
    assert row.hint.split('{')[0][:20] in hint


# ---- other programs' texts the start paths print ------------------------------------------------------------------

THIRD_PARTY_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'third_party_failures.yml')


def _third_party():
    import yaml  # pylint: disable=import-outside-toplevel
    with open(THIRD_PARTY_FILE, encoding='utf-8') as handle:
        return yaml.safe_load(handle)['texts']


@pytest.mark.parametrize('row', _third_party(), ids=lambda row: '%s-%s' % (row['matched'], row['origin'].split(' ')[0]))
def test_third_party_texts_are_read_and_cited(release, row):
    from citations import PACKAGE_FILE, source_lines  # pylint: disable=import-outside-toplevel
    if PACKAGE_FILE.match(row['origin']):
        lines = source_lines(row['origin'])
        assert row['at_line'] in lines[row['line'] - 1], '%s:%d no longer holds %r' % (row['origin'], row['line'], row['at_line'])
    else:
        assert 'line' not in row and ' ' in row['origin'], 'an origin that is not a readable file says why: %r' % row
    assert row['matched'] in set(sig.name for sig in table.FATAL_SIGNATURES)
    sig, _match = table.match_fatal(row['text'])
    assert sig is not None and sig.name == row['matched'], (row['text'], sig and sig.name)
    summary, hint, cause = digest([row['text']]).cause()
    assert cause == row['matched'] and hint and summary, (summary, hint, cause)
