"""seamseg's log line and files."""
import re

from gluontrain.torch.frcnn import log as L
from gluontrain.torch.frcnn.meters import AverageMeter


class _Summary:
    def __init__(self):
        self.scalars = []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, round(value, 6), step))


def test_format_iteration_widths_and_values():
    m = AverageMeter((), 1.)
    m.update(1.0)
    m.update(2.0)
    msg = L.format_iteration(3, 12, 7, 100, {'lr': 0.00125, 'loss': m})
    assert msg == '[ 3/12] [  7/100]\tlr=0.001\tloss=2.000 (1.500)'
    assert L.format_iteration(1, 9, 1, 1, {}) == '[1/9] [1/1]'
    # seamseg's multiple_lines dropped the values; fixed: one per line
    assert L.format_iteration(1, 1, 1, 1, {'a': 1.0}, multiple_lines=True) == \
        '[1/1] [1/1]\n\ta=1.000'


def test_iteration_writes_files_and_summary(tmp_path):
    L.init(str(tmp_path), 'training')
    L.init(str(tmp_path), 'training')  # twice: still one line per record
    m = AverageMeter((), .5)
    m.update(4.0)
    m.update(2.0)
    summary = _Summary()
    L.iteration(summary, 'train', 42, 1, 2, 3, 10, {'lr': 0.5, 'loss': m})
    L.get_logger().debug('debug goes to the console only')
    for h in L.get_logger().handlers:
        h.flush()
    lines = (tmp_path / 'training.log').read_text().splitlines()
    assert len(lines) == 1
    assert re.fullmatch(r'I \d\d-\d\d-\d\d \d\d:\d\d:\d\d \[1/2\] \[ 3/10\]\tlr=0\.500'
                        r'\tloss=2\.000 \(2\.667\)', lines[0])
    # TensorBoard gets the meter's last value, not its mean
    assert summary.scalars == [('train/lr', 0.5, 42), ('train/loss', 2.0, 42)]
