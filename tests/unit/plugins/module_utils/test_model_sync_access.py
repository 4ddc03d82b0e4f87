# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who may read what in a peer model sync: the forced command's request rules, known_hosts, authorized_keys, the
ownership rule for what root writes, and how an ssh failure is told (module_utils/model/model_sync_access.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import hashlib
import hmac
import stat

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.model import model_sync_access as access

ROOTS = ['/models/k26.versions', '/data/other.versions']
V = '/models/k26.versions/v1'
# a real ed25519 public key blob (type string + 32 bytes), and another
ED = 'AAAAC3NzaC1lZDI1NTE5AAAAIH7Xl12Kh1z5uS7RIlrdO1a9JvDy0Jx3kQ3M9aWmZ1cz'
ED2 = 'AAAAC3NzaC1lZDI1NTE5AAAAIFbePdSsun6efN4KypYaIWF9ngXBmMHJ4xD0ST1pyuAl'


def test_a_read_and_a_state_request_inside_a_served_versions_directory_are_accepted():
    assert access.parse_request('read 300001 %s/model-00001-of-00064.safetensors' % V, ROOTS) == {
        'op': 'read', 'root': '/models/k26.versions', 'parts': ['v1', 'model-00001-of-00064.safetensors'],
        'offset': 300001}
    assert access.parse_request('read 0 %s/sub/tokenizer.json' % V, ROOTS)['parts'] == ['v1', 'sub', 'tokenizer.json']
    assert access.parse_request('state ' + V, ROOTS) == {
        'op': 'state', 'root': '/models/k26.versions', 'parts': ['v1'], 'offset': 0}


@pytest.mark.parametrize('text, why', [
    ('', 'no command given'),
    ('sh', 'not a request this account serves'),
    ('cat /etc/shadow', 'not a request this account serves'),
    ('read 0 /etc/shadow', 'outside the versions directories'),
    ('read 0 /models/k26.versions.evil/v1/x', 'outside the versions directories'),
    ('read 0 %s/../../../etc/shadow' % V, 'not normalized'),
    ('read 0 %s/./x' % V, 'not normalized'),
    ('read 0 %s//x' % V, 'not normalized'),
    ('read 0 /models/k26.versions/.staging-v1/x', 'staging and hidden directories are not served'),
    ('read 0 %s' % V, 'a version directory, not a file'),
    ('read -1 %s/x' % V, 'not a byte count'),
    ('read 1e3 %s/x' % V, 'not a byte count'),
    ('read 0 %s/x; sh' % V, 'not a request this account serves'),
    ('read 0 %s/$(id)' % V, 'is not allowed'),
    ('read 0 %s/a b' % V, 'not a request this account serves'),
    ('read 0 %s/x\n' % V, 'control characters'),
    ('read  0 %s/x' % V, 'not a request this account serves'),
    ('state %s/x' % V, 'state takes a version directory'),
    ('state /models/k26.versions', 'outside the versions directories'),
    ('rsync --server --sender . /', 'not a request this account serves'),
])
def test_anything_else_is_refused_with_the_reason(text, why):
    with pytest.raises(access.Refused, match=None) as caught:
        access.parse_request(text, ROOTS)
    assert why in str(caught.value), str(caught.value)


def test_with_no_roots_everything_is_outside():
    with pytest.raises(access.Refused, match='none configured'):
        access.parse_request('read 0 %s/x' % V, [])


def test_roots_files_keep_only_absolute_normalized_directories():
    assert access.parse_roots(['/models/k26.versions\n# comment\n', 'relative\n/\n/a/../b\n/data/x.versions/\n',
                               '/models/k26.versions']) == ['/models/k26.versions']


def test_the_module_checks_its_own_requests_with_the_same_rules():
    assert access.check_read_request(V + '/x.safetensors', '/models/k26.versions', 5) == 'read 5 %s/x.safetensors' % V
    assert access.check_state_request(V) == 'state ' + V
    with pytest.raises(access.Refused):
        access.check_read_request(V + '/has space', '/models/k26.versions')


def test_a_public_key_is_checked_against_its_own_type():
    assert access.parse_public_key('ssh-ed25519 %s root@x' % ED) == ('ssh-ed25519', ED)
    for bad in ('', 'ssh-ed25519', 'ssh-dss %s' % ED, 'ssh-rsa %s' % ED, 'ssh-ed25519 !!!'):
        with pytest.raises(ValueError):
            access.parse_public_key(bad)


@pytest.mark.parametrize('line, problem', [
    ('gpu-01,10.0.0.1 ssh-ed25519 %s' % ED, None),
    ('[10.0.0.1]:2222 ssh-ed25519 %s comment' % ED, None),
    ('@revoked * ssh-ed25519 %s' % ED, None),
    ('@cert-authority * ssh-ed25519 %s' % ED, 'only @revoked'),
    ('gpu-01 ssh-ed25519', 'expected "HOSTS TYPE BASE64'),
    ('gpu-01 ssh-rsa %s' % ED, 'not a ssh-rsa key'),
    ('gpu 01" ssh-ed25519 %s' % ED, 'expected "TYPE BASE64'),
    ('gpu-01$ ssh-ed25519 %s' % ED, 'host field'),
    (5, 'expected one known_hosts line'),
])
def test_known_hosts_lines_given_in_the_inventory(line, problem):
    found = access.known_hosts_problem(line)
    assert (found is None) if problem is None else (problem in found), found


def test_a_host_is_known_by_plain_or_hashed_name_and_port():
    salt = b'0123456789abcdef0123'
    hashed = '|1|%s|%s' % (base64.b64encode(salt).decode(), base64.b64encode(
        hmac.new(salt, b'10.0.0.2', hashlib.sha1).digest()).decode())
    text = '\n'.join(['# comment', 'gpu-01,10.0.0.1 ssh-ed25519 %s' % ED, '%s ssh-ed25519 %s' % (hashed, ED2),
                      '[10.0.0.3]:2222 ssh-ed25519 %s' % ED, '@revoked 10.0.0.4 ssh-ed25519 %s' % ED,
                      '10.0.0.5 ssh-ed25519 broken'])
    assert access.known_keys(text, '10.0.0.1') == [('ssh-ed25519', ED)]
    assert access.known_keys(text, 'gpu-01') == [('ssh-ed25519', ED)]
    assert access.known_keys(text, '10.0.0.2') == [('ssh-ed25519', ED2)]
    assert access.known_keys(text, '10.0.0.3') == []
    assert access.known_keys(text, '10.0.0.3', 2222) == [('ssh-ed25519', ED)]
    assert access.known_keys(text, '10.0.0.4') == [] and access.known_keys(text, '10.0.0.5') == []
    assert access.known_keys(text, '10.0.0.9') == []


def test_the_role_s_known_hosts_has_the_inventory_lines_then_each_peer_by_name_and_address():
    text = access.known_hosts_text(['gpu-09 ssh-ed25519 %s' % ED2, ''], [
        {'name': 'gpu-01', 'address': '10.0.0.1', 'keys': ['ssh-ed25519 %s root@gpu-01' % ED, 'garbage']},
        {'name': 'gpu-02', 'address': None, 'keys': []}])
    assert text.splitlines()[1:] == ['gpu-09 ssh-ed25519 %s' % ED2, '10.0.0.1,gpu-01 ssh-ed25519 %s' % ED]
    assert access.known_keys(text, '10.0.0.1') == [('ssh-ed25519', ED)]


@pytest.mark.parametrize('options, bad', [
    ([], False),
    (['-c', 'aes128-gcm@openssh.com', '-p', '2222'], False),
    (['-o', 'StrictHostKeyChecking=accept-new'], True),
    (['-oStrictHostKeyChecking=no'], True),
    (['-o', 'UserKnownHostsFile=/dev/null'], True),
    (['-o', 'userknownhostsfile /tmp/x'], True),
    (['-o', 'HostKeyAlias=x'], True),
    (['-o', 'Compression=yes'], False),
])
def test_ssh_options_may_not_change_host_key_checking(options, bad):
    assert bool(access.ssh_options_problem(options)) == bad


def test_the_port_ssh_options_choose():
    assert access.ssh_port([]) == 22
    assert access.ssh_port(['-p', '2222']) == 2222
    assert access.ssh_port(['-p2200']) == 2200
    assert access.ssh_port(['-o', 'Port=2201']) == 2201


D = stat.S_IFDIR
F = stat.S_IFREG
L = stat.S_IFLNK


@pytest.mark.parametrize('chain, problem', [
    ([('/', 0, D | 0o755), ('/models', 0, D | 0o755), ('/models/k.versions', 0, D | 0o755)], None),
    ([('/', 0, D | 0o755), ('/var/tmp', 0, D | 0o1777), ('/var/tmp/x.versions', 0, D | 0o755)], None),
    ([('/', 0, D | 0o755), ('/models', 999, D | 0o755), ('/models/k.versions', 0, D | 0o755)], 'belongs to uid 999'),
    ([('/', 0, D | 0o755), ('/models', 0, D | 0o775)], 'writable by its group or others'),
    ([('/', 0, D | 0o755), ('/tmp', 0, D | 0o777)], 'writable by its group or others'),
    ([('/', 0, D | 0o755), ('/kh', 0, F | 0o646)], 'writable by its group or others'),
    ([('/', 0, D | 0o755), ('/models', 999, L | 0o777)], 'symlink owned by uid 999'),
    ([('/', 0, D | 0o755), ('/models', 0, L | 0o777)], None),
])
def test_root_writes_only_through_paths_root_alone_can_change(chain, problem):
    found = access.unsafe_path_problem(chain)
    assert (found is None) if problem is None else (problem in found), found


def test_the_user_the_module_runs_as_is_trusted_too():
    assert access.unsafe_path_problem([('/home/ci', 1000, D | 0o755)], (0, 1000)) is None


def test_authorized_keys_keep_other_lines_replace_ours_and_restrict_each_to_the_forced_command():
    command = '/usr/bin/python3 -I /usr/local/lib/llmops-sglang-sync/llmops_sglang_sync_serve.py'
    before = '\n'.join(['ssh-ed25519 %s admin@laptop' % ED2,
                        'restrict,command="%s" ssh-ed25519 %s llmops-sglang-sync:gpu-02' % (command, ED2),
                        'restrict,command="%s" ssh-ed25519 %s llmops-sglang-sync:gpu-07' % (command, ED2), ''])
    text = access.authorized_keys_text(before, [{'name': 'gpu-02', 'public_key': 'ssh-ed25519 %s x' % ED},
                                                {'name': 'gpu-03', 'public_key': ''}], command)
    assert text.splitlines() == [
        'ssh-ed25519 %s admin@laptop' % ED2,
        'restrict,command="%s" ssh-ed25519 %s llmops-sglang-sync:gpu-07' % (command, ED2),
        'restrict,command="%s" ssh-ed25519 %s llmops-sglang-sync:gpu-02' % (command, ED)]
    with pytest.raises(ValueError):
        access.authorized_key_line('/x" ,permitopen="*', 'ssh-ed25519 %s' % ED, 'h')


CHANGED = """@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Offending ED25519 key in /tmp/kh.bad:1
Host key for 10.231.249.2 has changed and you have requested strict checking.
Host key verification failed.
"""
UNKNOWN = """No ED25519 host key is known for 10.231.249.2 and you have requested strict checking.
Host key verification failed.
"""


def test_ssh_failures_are_told_apart_from_what_openssh_9_2_prints():
    assert 'does not match the known one' in access.ssh_failure(255, CHANGED)
    assert 'is not known' in access.ssh_failure(255, UNKNOWN)
    assert 'does not accept' in access.ssh_failure(255, 'sglang-sync@10.0.0.1: Permission denied (publickey).')
    assert access.ssh_failure(2, 'llmops-sglang-sync-serve: refused: outside').startswith('it refused the request: outside')
    assert access.ssh_failure(255, 'ssh: connect to host 10.0.0.1 port 22: No route to host').startswith('unreachable')
