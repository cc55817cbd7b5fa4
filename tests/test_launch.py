"""tests/launch.py: the launch helpers the multi-process tests share."""
import socket

from launch import (HOROVOD_GLOO_TIMEOUT_S, dist_env, free_port, horovod_env,
                    horovod_failure_report, horovodrun_command)


def test_free_port_can_be_bound_again():
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', port))
    assert 1024 <= port <= 65535


def test_dist_env_drops_an_outer_jobs_variables(monkeypatch):
    monkeypatch.setenv('RANK', '3')
    monkeypatch.setenv('MASTER_PORT', '29500')
    env = dist_env(GLUONTRAIN_X='2')
    assert 'RANK' not in env and 'MASTER_PORT' not in env
    assert (env['GLUONTRAIN_X'], env['OMP_NUM_THREADS'], env['CUDA_VISIBLE_DEVICES']) == \
        ('2', '1', '')


def test_horovodrun_command_quotes_the_program_for_sh():
    cmd = horovodrun_command(['python', 'w.py', '--network', 'mobilenet0.25', '--gpus', ''], 2)
    assert cmd[:6] == ['horovodrun', '-np', '2', '--gloo', '--gloo-timeout-seconds',
                       str(HOROVOD_GLOO_TIMEOUT_S)]
    # one argument for sh -c, the empty --gpus kept as ''
    assert cmd[6:] == ['sh', '-c', "'python' 'w.py' '--network' 'mobilenet0.25' '--gpus' ''"]
    env = horovod_env(MPLBACKEND='Agg')
    assert (env['PYTHONFAULTHANDLER'], env['MXNET_CPU_WORKER_NTHREADS'], env['MPLBACKEND']) == \
        ('1', '1', 'Agg')


def test_a_failed_run_reports_each_ranks_first_error():
    """The shape of the failure CI showed on 2026-11-30 (rank 0 aborted, rank 1 shut down with
    a long traceback): the report holds rank 0's cause, which the output's last 4,000
    characters (all the test showed then) did not."""
    rank1 = ['[1]<stderr>:Traceback (most recent call last):'] + [
        '[1]<stderr>:  File "recipe.py", line {}, in train'.format(i) for i in range(200)] + [
        '[1]<stderr>:mxnet.base.MXNetError: Horovod has been shut down.']
    output = '\n'.join(
        ['[0]<stdout>:[Epoch 0] Training cost: 3.1', '[1]<stdout>:loading',
         "[0]<stderr>:terminate called after throwing an instance of 'gloo::IoException'",
         '[0]<stderr>:  what():  Wait timeout after 30 seconds for key(s): 1.',
         '[0]<stderr>:Extension modules: ' + 'numpy.core._multiarray_umath, ' * 200]
        + rank1 + ['[0]<stderr>:Aborted', 'Process 0 exit with status code 134.'])
    assert len(output) - output.index('terminate called') > 4000
    report = horovod_failure_report(output, lines_per_rank=3, tail=100)
    rank0, rest = report.split('--- rank 1')
    assert rank0.startswith('--- rank 0, from its first error line (2 of its 5 lines):\n')
    assert "terminate called after throwing an instance of 'gloo::IoException'" in rank0
    assert 'Wait timeout after 30 seconds' in rank0 and 'Aborted' not in rank0  # its 5th line
    assert 'Extension modules: ' in rank0 and rank0.count('_multiarray_umath') < 15  # cut
    assert rest.startswith(', from its first error line (2 of its 203 lines):\n')
    assert report.count('in train') == 2  # rank 1's first 3 error lines, then the tail
    assert report.endswith('Process 0 exit with status code 134.')
    # horovodrun --prefix-timestamp's prefix is a rank's line too
    stamped = horovod_failure_report('Mon Nov 30 04:21:07 2026[1]<stderr>:Fatal Python error')
    assert stamped.startswith('--- rank 1, from its first error line (1 of its 1 lines):\n'
                              'Fatal Python error')
    # Horovod's own log line at level E (a pip build's absolute source path)
    logged = horovod_failure_report(
        '[0]<stderr>:[2026-11-30 04:21:07.123456: W pip-install-x/horovod/common/a.cc:9] '
        'warned\n[0]<stderr>:[2026-11-30 04:21:08.000001: E pip-install-x/horovod/common/'
        'operations.cc:697] Horovod background loop uncaught exception: peer closed')
    assert logged.startswith('--- rank 0, from its first error line (2 of its 2 lines):\n')
    # a run without an error line reports its tail only
    assert horovod_failure_report('[0]<stdout>:ok\n[1]<stdout>:ok', tail=10) == \
        "--- the output's last 10 characters:\nstdout>:ok"
