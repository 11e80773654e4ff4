import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _single_thread():
    # The models here are tiny: intra-op threads only add OpenMP hand-offs, which
    # spin badly when the CPU is shared with other jobs (100x slowdowns observed).
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
