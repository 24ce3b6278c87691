"""ember.backends' switches (TF32, cuDNN benchmark mode), set_float32_matmul_precision, and ember.cuda's
answers on a machine without a GPU (every device call a DeviceError that says so). The GPU side of
ember.cuda (memory figures, streams, events) is in test_cuda.py."""

import pytest

import ember


@pytest.fixture(autouse=True)
def restore_switches():
    before = (ember.backends.cuda.matmul.allow_tf32, ember.backends.cudnn.allow_tf32, ember.backends.cudnn.benchmark)
    yield
    ember.backends.cuda.matmul.allow_tf32, ember.backends.cudnn.allow_tf32, ember.backends.cudnn.benchmark = before


def test_switches_start_off_and_keep_what_is_set():
    assert not ember.backends.cuda.matmul.allow_tf32
    assert not ember.backends.cudnn.allow_tf32 and not ember.backends.cudnn.benchmark
    ember.backends.cudnn.benchmark = True
    ember.backends.cudnn.allow_tf32 = 1  # any truth value, as PyTorch's
    assert ember.backends.cudnn.benchmark is True and ember.backends.cudnn.allow_tf32 is True
    assert not ember.backends.cuda.matmul.allow_tf32  # each switch is its own
    ember.backends.cudnn.benchmark = False
    assert ember.backends.cudnn.benchmark is False
    assert ember.backends.cuda.is_built() == ember._build_config.CUDA_BACKEND


def test_float32_matmul_precision_drives_the_matmul_switch():
    assert ember.get_float32_matmul_precision() == "highest"
    ember.set_float32_matmul_precision("medium")
    assert ember.backends.cuda.matmul.allow_tf32 and ember.get_float32_matmul_precision() == "medium"
    ember.set_float32_matmul_precision("highest")
    assert not ember.backends.cuda.matmul.allow_tf32 and ember.get_float32_matmul_precision() == "highest"
    ember.backends.cuda.matmul.allow_tf32 = True
    assert ember.get_float32_matmul_precision() in ("high", "medium")
    with pytest.raises(ValueError, match="expected one of .*'highest'.*got 'fast'"):
        ember.set_float32_matmul_precision("fast")


def test_a_switch_ember_does_not_have_cannot_be_set():
    with pytest.raises(AttributeError, match="cudnn has no switch 'deterministic': .*use_deterministic_algorithms"):
        ember.backends.cudnn.deterministic = True
    with pytest.raises(AttributeError, match="matmul has no switch 'allow_fp16_reduced_precision_reduction'"):
        ember.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False


@pytest.mark.skipif(ember.cuda.is_available(), reason="a GPU is visible: test_cuda.py covers ember.cuda")
def test_cuda_calls_without_a_gpu_raise_device_errors():
    assert ember.cuda.device_count() == 0 and not ember.cuda.is_available()
    for call in (ember.cuda.current_device, ember.cuda.memory_allocated, ember.cuda.max_memory_allocated,
                 ember.cuda.empty_cache, ember.cuda.reset_peak_memory_stats, ember.cuda.synchronize,
                 lambda: ember.cuda.set_device(0), lambda: ember.cuda.Stream(0), ember.cuda.Event,
                 lambda: ember.cuda.memory_stats("cuda:0")):
        with pytest.raises(ember.DeviceError, match="no CUDA device|without CUDA"):
            call()


def test_cuda_device_arguments_are_checked():
    with pytest.raises(ValueError, match="expected a CUDA device .* got device\\(type='cpu'\\)"):
        ember.cuda.memory_allocated("cpu")
    with pytest.raises(ValueError, match="expected a CUDA device"):
        ember.cuda.synchronize(2.5)
