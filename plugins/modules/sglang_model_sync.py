#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_model_sync
short_description: Bring a checkpoint version to a host from a mirror or from a peer that has it, resumably
version_added: 0.1.0
description:
  - Fills the version directory O(dest) with the files of O(manifest), while the server keeps running on whatever
    directory its unit names now. Files are written into a staging directory next to O(dest)
    (C(.staging-NAME)), verified there with the checkpoint gate's rules (safetensors framing against the file size,
    the manifest's sizes and sha256), and the staging directory is then renamed to O(dest) in one step, with a
    marker file (C(.llmops-model.json)) inside. A host whose O(dest) holds a marker for this manifest has the
    version; nothing is transferred.
  - B(Sources.) From the mirror O(mirror) (an HTTP directory, C(MIRROR/FILE) for each manifest file) or from a host
    of O(peers) that has the version already, over SSH as O(ssh_user) with the key O(ssh_key). On the peer that
    account runs nothing but the role's forced command C(llmops_sglang_sync_serve.py), which answers two requests,
    C(state VERSION_DIR) and C(read OFFSET FILE) (it seeks past the bytes already here, so a resumed file is not
    read again), for files inside the peer's versions directories only (module_utils/model/model_sync_access.py).
  - B(Host keys.) Every connection uses C(StrictHostKeyChecking=yes) against O(known_hosts) only. A peer whose key
    is not in that file is not connected to; one whose key does not match is refused by ssh before anything is
    read. Either way the result's RV(fallback) names the peer and why, and the host falls back to the mirror (a
    different source, nothing read from that peer) or fails if there is no mirror. O(ssh_options) may not change
    host key checking.
  - B(Ownership.) Root writes only through paths that root (or the user the module runs as) owns and nobody else
    can write. The versions directory and its parents, the staging directory, the progress file's directory and
    O(known_hosts) are checked (resolved, then each component with C(lstat)) before anything is written, and the
    module fails naming the path otherwise. The directories it creates are 0755, the files 0644.
    Which source, and when, is decided by module_utils/model/model_sync.py from O(peers). By default
    (O(distribution=pipelined)) every host that lacks the version starts at once and follows its source's files as
    they arrive there, in a chain, so the fleet has it in about one transfer time; the mirror is read once per file
    (see O(distribution)). With O(distribution=waves) every host that has the version serves one that does not, the
    mirror serves only in a wave where no host has it, and a host waits (up to O(peer_wait) seconds) for its source
    to finish first; if the source fails or the wait runs out, it falls back to the mirror.
  - B(Resume.) A partial file in the staging directory is continued from its size (HTTP C(Range), or the peer's
    C(tail) offset); a file longer than declared is fetched again. A failed run leaves the staging directory as it
    is, so the next run continues; files that fail verification are removed so the next run fetches them again.
  - B(Progress) (bytes, rate, ETA) is written as JSON to O(progress_file) about once a second.
  - With O(cache_path), the digests verified here are recorded there (the preflight gate's verification cache,
    by the final path, size and mtime), so the gate that judges O(dest) next does not hash the files again.
author:
  - llmops.sglang maintainers (@llmops)
requirements:
  - C(ssh) (openssh-client) for peer transfers; the peers need C(sshd), the account O(ssh_user) and its forced command
    (the M(llmops.sglang.server) role sets both up, tasks/model_sync.yml)
options:
  dest:
    description: The version directory, for example C(/models/Kimi-K2.6.versions/k26-2026-11-30). Its parent is created.
    type: path
    required: true
  version:
    description: The version's name (recorded in the marker).
    type: str
    required: true
  manifest:
    description: Relative file name to C({size, sha256}); both are required for every file.
    type: dict
    required: true
  mirror:
    description: URL of the HTTP directory that holds the files (C(MIRROR/FILE)); empty when only peers serve.
    type: str
    default: ""
  host:
    description: This host's name in O(peers).
    type: str
    default: ""
  peers:
    description:
      - The hosts taking part, in play order, as C({name, address, have}); C(have) is whether that host has the
        version. Every host must be given the same list (the role builds it from the play's hosts).
      - The peers hold the version at the same O(dest) path.
    type: list
    elements: dict
    default: []
  ssh_key:
    description: Private key on this host that the peers accept for O(ssh_user) (the role generates one per host).
    type: path
    default: /var/lib/llmops-sglang/model-sync/id_ed25519
  ssh_user:
    description: The account on the peers (restricted to the forced command that serves model files). Never C(root).
    type: str
    default: sglang-sync
  known_hosts:
    description:
      - The only known_hosts file peer connections trust (C(StrictHostKeyChecking=yes), C(UserKnownHostsFile) set
        to it, C(GlobalKnownHostsFile=/dev/null)). The role writes it from C(sglang_model_source.known_hosts) and
        the peers' own host keys read over the Ansible connection.
      - It must belong to root (or the user the module runs as) and be writable by nobody else, like its directories.
    type: path
    default: /var/lib/llmops-sglang/model-sync/known_hosts
  ssh_options:
    description:
      - More C(ssh) options, for example C([-c, aes128-gcm@openssh.com]).
      - Options about host key checking (C(StrictHostKeyChecking), C(UserKnownHostsFile), C(GlobalKnownHostsFile),
        C(KnownHostsCommand), C(UpdateHostKeys), C(HostKeyAlias), C(VerifyHostKeyDNS), C(CheckHostIP)) are refused.
    type: list
    elements: str
    default: []
  peer_wait:
    description:
      - With O(distribution=waves), seconds to wait for the assigned peer to have the version before falling back
        to the mirror.
    type: int
    default: 3600
  poll_interval:
    description: Seconds between two looks at the assigned peer while waiting.
    type: float
    default: 2.0
  timeout:
    description:
      - Seconds a connection may stay silent before the transfer counts as interrupted (1 to 3600). With
        O(distribution=pipelined) also the stall period. A source that has sent no new byte for that long ends
        the read with an error, and the receiver continues from the next source.
    type: int
    default: 60
  distribution:
    description:
      - C(pipelined) (default) - every host starts at once and reads each file from its source while the source is still
        receiving it (the peer's C(follow) request). The first host reads from a host that has the version whole,
        or else from the mirror. Every next host reads from an earlier host of O(peers) that is still receiving,
        in a chain or a tree of fan-out O(fanout). When its source fails (its C(.sync-failed)) or stalls for
        O(timeout) seconds, the host continues from the bytes it has. It reads from its source's source, then
        from the hosts that have the version whole, and then from the mirror. Chosen as the default from the
        measurement (docs/model-sync.md, 24 hosts in 1.76 transfer times against 15.8 for waves).
      - C(waves) - a host waits until its source has the whole version, then copies it. The number of hosts that
        have the version doubles per wave.
    type: str
    choices: [waves, pipelined]
    default: pipelined
  fanout:
    description: With O(distribution=pipelined), how many hosts one receiving host serves at once (1, a chain, to 16).
    type: int
    default: 1
  rate_limit:
    description:
      - Bytes per second this host's transfer may take, 0 for no cap. Mirror reads are paced here. Peer reads are
        paced by the serving peer's forced command, which caps that peer's disk reads and link too (with
        O(distribution=waves) and a cap, a peer's files come through its paced C(follow), not its C(read)).
    type: int
    default: 0
  progress_file:
    description: Where to write the progress JSON (state, source, done, total, rate, eta); not written when unset.
    type: path
  cache_path:
    description: The preflight gate's verification cache to record the verified digests in (see M(llmops.sglang.sglang_preflight)).
    type: path
attributes:
  check_mode:
    support: full
    description: Reports what would be transferred, from where, and from which offsets; transfers nothing.
  diff_mode:
    support: full
    description: The version directory before (absent, or its staging directory's partial files) and after.
  platform:
    support: full
    platforms: posix
    description: Linux hosts (C(ssh) and C(sh) for peer transfers).
notes:
  - The server is not touched; pointing the unit at O(dest) is the caller's (the M(llmops.sglang.server) role puts
    O(dest) into the unit's C(--model-path), so its last-known-good copy records which version served).
"""

EXAMPLES = r"""
- name: Bring version k26-2026-11-30 here, from the mirror or from a peer that has it
  llmops.sglang.sglang_model_sync:
    dest: /models/Kimi-K2.6.versions/k26-2026-11-30
    version: k26-2026-11-30
    manifest: "{{ k26_manifest }}"
    mirror: http://models.example.internal/k26-2026-11-30
    host: "{{ inventory_hostname }}"
    peers:
      - {name: gpu-01, address: 10.0.0.1, have: true}
      - {name: gpu-02, address: 10.0.0.2, have: false}
  register: sync

- name: Peers only, with an operator's key and known_hosts file
  llmops.sglang.sglang_model_sync:
    dest: /models/Kimi-K2.6.versions/k26-2026-11-30
    version: k26-2026-11-30
    manifest: "{{ k26_manifest }}"
    host: "{{ inventory_hostname }}"
    peers: "{{ k26_peers }}"
    ssh_key: /etc/llmops/model-peer-key
    known_hosts: /etc/llmops/model-peer-known-hosts
"""

RETURN = r"""
state:
  description: C(present) (had it already), C(synced), or C(would sync) (check mode).
  returned: always
  type: str
version_dir:
  description: The version directory (O(dest)).
  returned: always
  type: str
source:
  description: Where the bytes came from - C(mirror), a peer's name, or null when nothing was needed.
  returned: always
  type: str
wave:
  description: This host's wave in the fan-out (0 = first), or its depth in the pipelined chain or tree; null when it had the version.
  returned: always
  type: int
fallback:
  description:
    - "Why the assigned peer was not used, empty when it was: C(PEER: reason), for example its own sync failed,
      the wait ran out, its host key is not in O(known_hosts) or does not match, it refused the request. Pipelined:
      each source given up on, C(SOURCE: reason (FILE at byte N)), joined with C(; )."
  returned: always
  type: str
  sample: "gpu-01: its host key does not match the known one (StrictHostKeyChecking=yes): refused, nothing read from it"

files:
  description: "Per file: [{file, size, offset, action, bytes}] (action fetch, resume, refetch or have; bytes transferred)."
  returned: always
  type: list
  elements: dict
refetched:
  description:
    - "Pipelined: each file fetched again after it failed its check, C(FILE from SOURCE (it failed its check with
      bytes from SENDERS)), or C(FILE from SOURCE: why (at byte N)) for a try that did not bring it whole. A peer that
      sent none of the file's bytes is asked first, then the peers that did, the mirror last."
  returned: when a file failed its check in pipelined distribution
  type: list
  elements: str
transferred_bytes:
  description: Bytes transferred in this run (from each source).
  returned: always
  type: dict
  sample: {mirror: 0, gpu-01: 4194304}
seconds:
  description: Time the transfer took (waiting for the source excluded).
  returned: always
  type: float
verify_seconds:
  description: Time the verification took.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.llmops.sglang.plugins.module_utils.model import model_sync, model_sync_driver
from ansible_collections.llmops.sglang.plugins.module_utils.host.host_adapters import SystemClock
from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync_adapters import Mirror, Peers, SyncFiles


def main():
    module = AnsibleModule(argument_spec=model_sync.ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    clock = SystemClock()
    peers = Peers(module, params)
    try:
        msg, result = model_sync_driver.run(params, SyncFiles(clock), Mirror(params, open_url), peers, clock,
                                            check_mode=module.check_mode, diff=module._diff)
    finally:
        peers.close()
    if msg is not None:
        module.fail_json(msg=msg, **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
