"""The loader itself: it really is the pinned release, its parser is the one `sglang serve` builds, pins agree."""

import json
import re

from ansible_collections.llmops.sglang.plugins.module_utils import pins


def test_the_unpacked_wheel_is_the_pinned_release(release):
    meta = release.release_file('sglang-%s.dist-info/METADATA' % release.release())
    with open(meta, encoding='utf-8') as handle:
        version = re.search(r'^Version: (\S+)$', handle.read(), re.M).group(1)
    assert version == release.release()
    assert release.server_args().__file__.startswith(release.ensure_release())


def test_the_parser_is_built_as_prepare_server_args_builds_it(release):
    # server_args.py:679-680: the prog is "sglang serve" whatever the entry point (also python -m sglang.launch_server)
    lines = release.source('server_args.py')
    assert lines[678].strip() == 'parser = argparse.ArgumentParser(prog="sglang serve")'
    assert lines[679].strip() == 'ServerArgs.add_cli_args(parser)'
    assert release.real_parser().prog == 'sglang serve'


def test_parse_reports_argparse_errors_as_sglang_serve_does(release):
    ok = release.parse(['--model-path', '/m', '--tp-size', '8'])
    assert ok.ok and ok.exit_code == 0 and ok.namespace.tp_size == 8
    bad = release.parse(['--model-path', '/m', '--cuda-graph-max-bs', '8'])
    assert not bad.ok and bad.exit_code == 2
    assert 'sglang serve: error: ambiguous option: --cuda-graph-max-bs could match' in bad.error
    missing = release.parse([])
    assert missing.exit_code == 2 and 'the following arguments are required: --model-path' in missing.error


def test_flag_table_describes_every_action_as_json(release):
    table = release.flag_table()
    assert json.loads(json.dumps(table)) == table
    helpless = [action for action in release.real_parser()._actions if action.dest != 'help']
    assert [row['dest'] for row in table] == [action.dest for action in helpless]
    model = next(row for row in table if row['dest'] == 'model_path')
    assert model['option_strings'] == ['--model-path', '--model'] and model['required']
    assert next(row for row in table if '--disable-cuda-graph' in row['option_strings'])['deprecated']


def test_the_pins_are_the_release_pins(release):
    # plugins/module_utils/pins.py is the one place for the pins (the role, the fleet, the bench and the tests read
    # it; tests/unit/plugins/module_utils/test_pins.py checks they do); every pin but sglang's must be the wheel's.
    assert pins.PINS['sglang'] == pins.RELEASE == release.release()
    for package, version in pins.PINS.items():
        if package != 'sglang':
            assert '%s==%s' % (package, version) in release.requires(), package
