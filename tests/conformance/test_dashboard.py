"""Every metric the shipped Grafana dashboard queries exists where it comes from: SGLang's names in the 0.5.23
release's source, the router's in what sglang-router 0.3.2 was measured to export (tests/fixtures), the deployment
metrics in the collection's own renderer, and Prometheus's `up`."""

import functools
import glob
import json
import os
import re

import pytest

import sglang_release
from ansible_collections.llmops.sglang.plugins.module_utils.monitoring import deploy_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, 'roles', 'monitoring', 'files', 'grafana-dashboard-sglang.json')
ROUTER_FIXTURE = os.path.join(ROOT, 'tests', 'fixtures', 'sglang-router-0.3.2-metrics.txt')
# A selector: a metric name followed by its label matchers (every query of the dashboard selects by host).
SELECTOR = re.compile(r'([A-Za-z_:][A-Za-z0-9_:]*)\{')
# Anything that looks like a metric name, with or without matchers (to catch one the selector pattern would miss).
METRIC_LIKE = re.compile(r'\b(sglang:[a-z0-9_:]+|smg_[a-z0-9_]+|sglang_deploy_[a-z0-9_]+|node_[a-z0-9_]+)')
SUFFIXES = ('_bucket', '_sum', '_count')


def queries():
    with open(DASHBOARD, encoding='utf-8') as handle:
        dashboard = json.load(handle)
    found = [(panel['title'], target['expr']) for panel in dashboard['panels'] for target in panel.get('targets', [])]
    found += [(var['name'], var['query']['query']) for var in dashboard['templating']['list'] if var.get('type') == 'query']
    return found


@functools.lru_cache(maxsize=None)
def sglang_names():
    """name -> kind of every prometheus_client metric the release declares with a literal name="sglang:..."."""
    names = {}
    pattern = re.compile(r'\b(Counter|Gauge|Histogram|Summary)\(\s*name="(sglang:[a-z0-9_:]+)"', re.S)
    for path in glob.glob(os.path.join(sglang_release.release_file('sglang'), '**', '*.py'), recursive=True):
        with open(path, encoding='utf-8') as handle:
            for kind, name in pattern.findall(handle.read()):
                names[name] = kind
    return names


@functools.lru_cache(maxsize=None)
def router_names():
    """name -> type measured on sglang-router 0.3.2 (the fixture's non-comment lines: name type labels)."""
    with open(ROUTER_FIXTURE, encoding='utf-8') as handle:
        return dict(line.split()[:2] for line in handle if line.strip() and not line.startswith('#'))


def family(name, kinds):
    """The declared family a queried series name belongs to (histograms' _bucket/_sum/_count, counters' _total)."""
    if name in kinds:
        return name
    for suffix in SUFFIXES:
        base = name[:-len(suffix)]
        if name.endswith(suffix) and kinds.get(base) in ('Histogram', 'histogram', 'Summary', 'summary'):
            return base
    return None


def test_every_metric_is_queried_through_a_selector():
    for title, expr in queries():
        selected = set(SELECTOR.findall(expr))
        assert set(METRIC_LIKE.findall(expr)) <= selected, (title, expr)


@pytest.mark.parametrize('title,expr', queries())
def test_every_queried_metric_exists_where_it_comes_from(title, expr):
    sglang, router = sglang_names(), router_names()
    deploy = set(deploy_metrics.PREFIX + name for name, _help in deploy_metrics.METRICS)
    names = SELECTOR.findall(expr)
    assert names, (title, expr)
    for name in names:
        if name.startswith('sglang:'):
            assert family(name, sglang), '%s: %s is not a metric of SGLang 0.5.23' % (title, name)
        elif name.startswith('smg_'):
            assert family(name, router), '%s: %s was not measured on sglang-router 0.3.2 (%s)' % (title, name, ROUTER_FIXTURE)
        elif name.startswith('sglang_deploy_'):
            assert name in deploy, '%s: %s is not rendered by module_utils/monitoring/deploy_metrics.py' % (title, name)
        else:
            assert name == 'up', '%s: %s comes from nowhere this test knows' % (title, name)


def test_the_panels_sglangs_own_dashboard_has_and_the_routers_are_there():
    exprs = ' '.join(expr for _title, expr in queries())
    for name in ('sglang:time_to_first_token_seconds_bucket', 'sglang:inter_token_latency_seconds_bucket',
                 'sglang:cache_hit_rate', 'sglang:gen_throughput', 'smg_router_requests_total', 'smg_worker_health',
                 'smg_http_responses_total', 'smg_router_request_duration_seconds_bucket'):
        assert name + '{' in exprs, name


def test_the_names_the_dashboard_relies_on_stand_where_the_docs_cite_them():
    lines = sglang_release.source('observability/metrics_collector.py')
    for line, name in ((383, 'sglang:gen_throughput'), (389, 'sglang:cache_hit_rate'),
                       (2041, 'sglang:time_to_first_token_seconds'), (2051, 'sglang:inter_token_latency_seconds')):
        assert 'name="%s"' % name in lines[line - 1], (line, lines[line - 1])
