# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_preflight's decisions (module_utils/model/preflight) and the gates' order (preflight_driver) on fakes: a host
whose nvidia-smi, systemctl and files answer from a script, a checkpoint directory as listings and bytes, and a fake
clock (nothing sleeps, nothing runs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import stat
import struct

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host import nvidia_smi

from ansible_collections.llmops.sglang.plugins.module_utils.model import checkpoint, preflight, preflight_driver

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'nvidia-smi', 'h200-full')
ROOT_DIR = stat.S_IFDIR | 0o700
ROOT_FILE = stat.S_IFREG | 0o600


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def health_rows(count=8):
    """The real H200's health row (fixtures h200-full), once per GPU with its index and uuid varied."""
    header = [h.split(' [')[0] for h in fixture('query-gpu-header.csv').splitlines()[0].split(', ')]
    row = dict(zip(header, fixture('query-gpu.csv').splitlines()[0].split(', ')))
    lines = []
    for i in range(count):
        row.update({'index': str(i), 'uuid': 'GPU-%d000-aaaa' % i})
        lines.append(', '.join(row[field] for field in nvidia_smi.HEALTH_FIELDS))
    return '\n'.join(lines) + '\n'


def params(**more):
    out = {'unit': 'a.service', 'checks': ['gpu', 'checkpoint'], 'server_argv': ['--tp-size', '8'], 'environment': [],
           'gpu_name': '', 'config_dir': '/etc/sglang', 'unit_dir': '/etc/systemd/system', 'venv': None,
           'model_path': '/models/m', 'manifest': {}, 'cache_path': None, 'hash_workers': 4, 'growth_interval': 1.0,
           'waive': [], 'nvidia_smi_timeout': 30}
    out.update(more)
    return out


class FakeClock(object):
    """Time moves only when slept on (and by `step` per reading, to stand for the work between two readings)."""

    def __init__(self, now=1000.0, step=0.0):
        self.now = now
        self.step = step
        self.sleeps = []

    def time(self):
        self.now += self.step
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class FakeHost(object):
    """nvidia-smi's answers by subcommand, `systemctl show` props by unit, cgroup.procs texts by cgroup directory,
    files by path; every call recorded."""

    def __init__(self, smi='/usr/bin/nvidia-smi', answers=None, units=None, cgroups=None, files=None):
        self.smi_path = smi
        self.answers = answers or {}
        self.units = units or {}
        self.cgroups = cgroups or {}
        self.files = files or {}
        self.calls = []

    def nvidia_smi(self):
        return self.smi_path

    def smi(self, argv):
        self.calls.append(argv)
        key = argv[1].split('=')[0]
        return self.answers.get(key, (0, '', ''))

    def unit_props(self, unit, names):
        self.calls.append(('show', unit, names))
        return self.units.get(unit)

    def cgroup_procs(self, top):
        self.calls.append(('cgroup', top))
        return self.cgroups.get(top)

    def env_names(self, config_dir):
        return sorted(os.path.basename(p)[:-len('.env')] for p in self.files
                      if os.path.dirname(p) == config_dir and p.endswith('.env'))

    def read(self, path):
        return self.files.get(path)

    def torch_version_py(self, venv):
        return self.files.get(os.path.join(venv, 'torch-version'))


def healthy(**more):
    answers = {'--query-gpu': (0, health_rows(), ''), '--query-compute-apps': (0, '', ''),
               '--version': (0, fixture('q.txt'), '')}
    answers.update(more)
    return answers


# ---- options ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('more, message', [
    ({'waive': ['persistence', 'ecc_uncorrected']}, 'waive: unknown check(s) persistence; the checks are nvidia_smi'),
    ({'server_argv': ['--tp-size', 'x']}, 'server_argv: --tp-size, --nnodes, --base-gpu-id and --gpu-id-step must be integers'),
    ({'server_argv': ['--tp-size', '8', '--gpu-id-step', '0']}, 'SGLang needs --tp-size >= 1, --base-gpu-id >= 0'),
    ({'hash_workers': 0}, 'hash_workers must be >= 1 and growth_interval >= 0'),
    ({'growth_interval': -1}, 'hash_workers must be >= 1 and growth_interval >= 0'),
    ({'manifest': {'a': {'size': 'big'}}}, "sglang_model_manifest['a'].size must be a byte count"),
])
def test_bad_options_are_refused_with_the_modules_message(more, message):
    with pytest.raises(ValueError) as exc:
        preflight.inputs(params(**more))
    assert message in str(exc.value)


def test_good_options_give_the_placement_and_the_manifest():
    place, manifest = preflight.inputs(params(environment=['CUDA_VISIBLE_DEVICES="4,5"'], server_argv=['--tp-size', '2'],
                                              manifest={'a': {'size': 1}}))
    assert place['tp_per_node'] == 2 and place['cuda_visible_devices'] == '4,5'
    assert manifest == {'a': {'size': 1, 'sha256': None}}


# ---- the unit's processes: the cgroup walk ---------------------------------------------------------------------

def test_the_cgroup_walk_takes_the_first_hierarchy_that_has_the_unit():
    props = {'ControlGroup': '/system.slice/a.service', 'MainPID': '41'}
    host = FakeHost(units={'a.service': props},
                    cgroups={'/sys/fs/cgroup/unified/system.slice/a.service': ['41 42\n', '43\n'],
                             '/sys/fs/cgroup/systemd/system.slice/a.service': ['99\n']})
    assert preflight_driver.unit_pids(host, 'a.service') == {41, 42, 43}
    # cgroup v2 looked at first, the hybrid's unified hierarchy answered, name=systemd never read
    looked = [c[1] for c in host.calls if c[0] == 'cgroup']
    assert looked == ['/sys/fs/cgroup/system.slice/a.service', '/sys/fs/cgroup/unified/system.slice/a.service']


@pytest.mark.parametrize('props, expected', [
    (None, set()),                                       # no systemctl, or it failed
    ({'ControlGroup': '', 'MainPID': '7'}, {7}),         # no cgroup: the main PID
    ({'ControlGroup': '/x.service', 'MainPID': '0'}, set()),  # a cgroup no hierarchy has, no main process
])
def test_unit_pids_without_a_cgroup_to_walk(props, expected):
    assert preflight_driver.unit_pids(FakeHost(units={'a.service': props}), 'a.service') == expected
    assert preflight.cgroup_tops(props) == ([] if not (props or {}).get('ControlGroup') else
                                            [m + props['ControlGroup'] for m in preflight.CGROUP_MOUNTS])


# ---- which other instances count -------------------------------------------------------------------------------

@pytest.mark.parametrize('props, counts', [
    ({'ActiveState': 'active', 'UnitFileState': 'disabled'}, True),
    ({'ActiveState': 'inactive', 'UnitFileState': 'disabled'}, False),   # stopped, not started at boot
    ({'ActiveState': 'failed', 'UnitFileState': 'enabled'}, True),       # starts again at boot
    ({'ActiveState': 'inactive', 'UnitFileState': 'linked-runtime'}, True),
    ({}, True),
    (None, True),                                                        # no systemctl: it may run
])
def test_which_peers_count(props, counts):
    assert preflight.peer_counts(props) is counts


def test_peer_claims_read_the_role_files_of_the_other_instances_only():
    unit = '[Service]\nExecStart=/opt/v/bin/python -m sglang.launch_server --model-path /m --tp-size 4\n'
    files = {'/etc/sglang/a.env': 'CUDA_VISIBLE_DEVICES="0,1,2,3"\n', '/etc/sglang/b.env': 'CUDA_VISIBLE_DEVICES="4,5,6,7"\n',
             '/etc/sglang/b.secrets.env': 'SGLANG_API_KEY="x"\n', '/etc/sglang/c.env': 'CUDA_VISIBLE_DEVICES="4"\n',
             '/etc/sglang/d.env': '', '/etc/systemd/system/a.service': unit, '/etc/systemd/system/b.service': unit,
             '/etc/systemd/system/c.service': unit}
    host = FakeHost(files=files, units={'b.service': {'ActiveState': 'active'},
                                        'c.service': {'ActiveState': 'inactive', 'UnitFileState': 'disabled'}})
    assert preflight.instance_names(host.env_names('/etc/sglang'), 'a') == ['b', 'c', 'd']
    claims = preflight_driver.peer_claims(params(), host, 'a')
    assert [c['name'] for c in claims] == ['b.service']   # c stopped and disabled, d has no unit file


# ---- the GPU gate ----------------------------------------------------------------------------------------------

def test_no_nvidia_smi_is_not_judged_and_nothing_runs():
    host = FakeHost(smi=None)
    result = preflight_driver.gpu_gate(params(), preflight.inputs(params())[0], host)
    assert result['status'] == 'not_judged' and result['reason'] == preflight.NO_SMI and host.calls == []


def test_a_hung_nvidia_smi_is_a_finding_naming_the_timeout():
    host = FakeHost(answers={'--query-gpu': (124, '', '')})
    result = preflight_driver.gpu_gate(params(), preflight.inputs(params())[0], host)
    assert result['status'] == 'failed' and result['reason'] == 'nvidia-smi did not answer'
    assert result['findings'][0]['message'].startswith('nvidia-smi --query-gpu failed (rc=124, timed out after 30s): no GPU rows')
    waived = preflight_driver.gpu_gate(params(waive=['nvidia_smi']), preflight.inputs(params())[0], host)
    assert waived['status'] == 'waived' and waived['findings'][0]['waived']


def test_a_healthy_box_and_another_units_process_on_its_gpus():
    place = preflight.inputs(params())[0]
    host = FakeHost(answers=healthy(), units={'a.service': {'ControlGroup': '', 'MainPID': '41'}},
                    files={'/venv/torch-version': "cuda: Optional[str] = '12.9'\n"})
    ok = preflight_driver.gpu_gate(params(venv='/venv'), place, host)
    assert (ok['status'], ok['claimed'], ok['driver_cuda'], ok['torch_cuda'], ok['reason']) == (
        'ok', list(range(8)), '13.0', '12.9', '')
    apps = '77, python3, 1000, GPU-3000-aaaa\n41, python3, 1000, GPU-2000-aaaa\n'
    host = FakeHost(answers=healthy(**{'--query-compute-apps': (0, apps, '')}),
                    units={'a.service': {'ControlGroup': '', 'MainPID': '41'}})
    bad = preflight_driver.gpu_gate(params(), place, host)
    assert [(f['check'], f['gpu']) for f in bad['findings']] == [('foreign_process', 3)]
    assert bad['reason'] == preflight.NO_TORCH_CUDA


# ---- the checkpoint gate ---------------------------------------------------------------------------------------

def shard_bytes(i, nbytes=64):
    header = json.dumps({'w': {'dtype': 'U8', 'shape': [nbytes], 'data_offsets': [0, nbytes]}}).encode()
    header += b' ' * (-len(header) % 8)
    return struct.pack('<Q', len(header)) + header + bytes(bytearray((i * j) % 251 for j in range(nbytes)))


class FakeFiles(object):
    """A checkpoint directory as listings (one per snapshot(), the last repeating) and bytes; lstat results given."""

    def __init__(self, path, content, listings=None, stats=None, write_error=None):
        self.path = path
        self.content = content
        self.listings = listings or [dict((name, (len(data), 1)) for name, data in content.items())]
        self.stats = stats or {}
        self.write_error = write_error
        self.hashed = []
        self.written = None
        self.workers = None

    def isdir(self, path):
        return path == self.path

    def snapshot(self, _path):
        return self.listings.pop(0) if len(self.listings) > 1 else self.listings[0]

    def read_bytes(self, path):
        return self.content.get(os.path.relpath(path, self.path))

    def read_text(self, path):
        return self.stats.get(path, {}).get('text')

    def exists(self, path):
        return path in self.stats

    def lstat(self, path):
        return self.stats.get(path, {}).get('lstat')

    @staticmethod
    def realpath(path):
        return path

    def shard_problem(self, full):
        data = self.content[os.path.relpath(full, self.path)]
        if data is None:
            raise IOError('Input/output error')
        n = checkpoint.header_length(data[:8])
        return checkpoint.safetensors_problem(data[:8], data[8:8 + (n or 0)], len(data))

    def sha256_many(self, paths, workers):
        self.workers = workers
        self.hashed.extend(paths)
        return [hashlib.sha256(self.content[os.path.relpath(p, self.path)]).hexdigest() for p in paths]

    def write_cache(self, path, files):
        if self.write_error:
            raise OSError(self.write_error)
        self.written = (path, files)
        return 'written'


def model(count=3):
    content = dict(('model-%05d-of-%05d.safetensors' % (i, count), shard_bytes(i)) for i in range(1, count + 1))
    manifest = dict((name, {'size': len(data), 'sha256': hashlib.sha256(data).hexdigest()}) for name, data in content.items())
    return content, manifest


def gate(files, manifest, clock=None, check_mode=False, **more):
    return preflight_driver.checkpoint_gate(params(manifest=manifest, **more), manifest, files, clock or FakeClock(),
                                            check_mode)


def test_the_second_look_waits_out_the_growth_interval_on_the_clock():
    content, manifest = model()
    clock = FakeClock(step=0.25)   # every reading 0.25 s later: the first look took that long
    result = gate(FakeFiles('/models/m', content), manifest, clock, growth_interval=1.0)
    assert clock.sleeps == [0.75] and result['status'] == 'ok' and result['shards'] == 3 and result['hashed'] == 3
    assert gate(FakeFiles('/models/m', content), manifest, FakeClock(step=2.0), growth_interval=1.0)['status'] == 'ok'
    assert preflight.growth_wait(1.0, 2.0) == 0.0


def test_a_growing_file_or_a_download_marker_means_no_hashing():
    content, manifest = model()
    first = dict((name, (len(data), 1)) for name, data in content.items())
    files = FakeFiles('/models/m', content, listings=[first, dict(first, **{'partial.bin': (10, 2)})])
    result = gate(files, manifest)
    assert [f['check'] for f in result['findings']] == ['shard_growing'] and files.hashed == []
    files = FakeFiles('/models/m', content, listings=[dict(first, **{'x.safetensors.aria2': (1, 1)})])
    result = gate(files, manifest)
    assert [f['check'] for f in result['findings']] == ['download_in_progress'] and files.hashed == []
    assert not preflight.should_hash({}, [], []) and preflight.should_hash(manifest, [], [])


@pytest.mark.parametrize('dir_stat, file_stat, trusted', [
    ((0, ROOT_DIR), (0, ROOT_FILE), True),
    ((0, ROOT_DIR), (0, ROOT_FILE | 0o060), False),          # others can write it
    ((1000, ROOT_DIR), (0, ROOT_FILE), False),               # not root's directory
    ((0, ROOT_DIR), (0, stat.S_IFLNK | 0o600), False),       # a symlink
    ((0, ROOT_FILE), (0, ROOT_FILE), False),                 # its "directory" is a file
    (None, (0, ROOT_FILE), False),
    ((0, ROOT_DIR), None, False),
])
def test_whether_to_trust_the_digest_cache(dir_stat, file_stat, trusted):
    assert preflight.cache_trusted(dir_stat, file_stat) is trusted


def test_a_trusted_cache_spares_the_hashing_an_untrusted_one_does_not():
    content, manifest = model()
    names = sorted(manifest)
    cache = dict(('/models/m/' + n, {'size': manifest[n]['size'], 'mtime_ns': 1, 'sha256': manifest[n]['sha256']})
                 for n in names[:2])
    text = checkpoint.render_cache(cache)
    stats = {'/state/c.json': {'lstat': (0, ROOT_FILE), 'text': text}, '/state': {'lstat': (0, ROOT_DIR)}}
    files = FakeFiles('/models/m', content, stats=stats)
    warm = gate(files, manifest, cache_path='/state/c.json')
    assert (warm['cached'], warm['hashed'], warm['cache']) == (2, 1, 'written')
    assert files.hashed == ['/models/m/' + names[2]] and files.workers == 1
    assert sorted(files.written[1]) == ['/models/m/' + n for n in names]
    stats['/state/c.json']['lstat'] = (0, ROOT_FILE | 0o066)
    files = FakeFiles('/models/m', content, stats=stats)
    cold = gate(files, manifest, cache_path='/state/c.json')
    assert (cold['cached'], cold['hashed']) == (0, 3) and files.workers == 3


def test_check_mode_and_a_failed_write_leave_the_cache_as_it_was():
    content, manifest = model()
    files = FakeFiles('/models/m', content)
    assert gate(files, manifest, check_mode=True, cache_path='/s/c.json')['cache'] == 'not written (check mode)'
    assert files.written is None
    failing = FakeFiles('/models/m', content, write_error='No space left on device')
    assert gate(failing, manifest, cache_path='/s/c.json')['cache'] == 'not written: No space left on device'


def test_shards_from_the_index_and_unreadable_or_damaged_ones():
    content, manifest = model(2)
    names = sorted(content)
    index = json.dumps({'weight_map': {'a': names[0]}}).encode()
    assert preflight.shard_names(index, content) == names[:1]
    for broken in (b'{not json', b'\xff\xfe', b'[]', None):
        assert preflight.shard_names(broken, dict(content, **{'x.bin': 1})) == names
    content[names[1]] = content[names[1]][:-5]
    content['model-00003-of-00002.safetensors'] = None   # cannot be read
    result = gate(FakeFiles('/models/m', content, listings=[{n: (1, 1) for n in content}]), {})
    assert [(f['check'], f['file']) for f in result['findings']] == [
        ('shard_invalid', names[1]), ('shard_invalid', 'model-00003-of-00002.safetensors')]
    assert 'it cannot be read: Input/output error' in result['findings'][1]['message']


def test_a_missing_model_directory_is_skipped_and_the_result_joins_both_gates():
    assert gate(FakeFiles('/elsewhere', {}), {})['status'] == 'skipped'
    finding = {'check': 'persistence_mode', 'gpu': 1, 'message': 'm', 'waived': True}
    out = preflight.result({'status': 'waived', 'findings': [finding]},
                           {'status': 'failed', 'findings': [{'check': 'manifest_size', 'file': 'f', 'message': 'x', 'waived': False}]})
    assert (out['ok'], out['failures'], out['waived']) == (False, ['x'], ['persistence_mode'])
    assert set(out) == {'ok', 'failures', 'waived', 'gpu', 'checkpoint', 'summary'}


def test_run_skips_the_gates_not_asked_for():
    host = FakeHost(smi=None)
    out = preflight_driver.run(params(checks=['gpu']), preflight.inputs(params())[0], {}, host, None, FakeClock(), False)
    assert out['checkpoint'] == {'status': 'skipped', 'findings': []} and out['gpu']['status'] == 'not_judged'
    out = preflight_driver.run(params(checks=['checkpoint'], model_path=None), None, {}, None, None, FakeClock(), False)
    assert out['ok'] and out['gpu']['status'] == out['checkpoint']['status'] == 'skipped'
