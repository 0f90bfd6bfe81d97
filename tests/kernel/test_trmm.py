"""The GIL-free triangular product and worker threads of exact dpMMD (kernel/_trmm)."""


import numpy as np
import pytest
from scipy.linalg import blas
from threadpoolctl import threadpool_limits

from skdptest.kernel import _route_exact as _mmd  # the quadratic forms (and _MaskRows)
from skdptest.kernel import _trmm


def _symmetric(n, seed):
    rng = np.random.default_rng(seed)
    A = rng.random((n, n))
    return np.ascontiguousarray(A + A.T)


@pytest.mark.parametrize("n, c", [(1, 1), (37, 5), (333, 77), (200, 130)])
def test_trmm_rows_is_scipys_dtrmm_and_reads_only_the_strict_lower_triangle(n, c):
    K = _symmetric(n, 0)
    M = np.random.default_rng(1).normal(size=(c, n))
    Kn = K.copy()
    Kn[np.triu_indices(n)] = np.nan  # upper triangle and diagonal never read
    P = M.copy()
    with threadpool_limits(1, "blas"):  # as map_row_blocks calls it
        expected = blas.dtrmm(1.0, K.T, M.T, lower=0, diag=1).T
        _trmm.trmm_rows(Kn, P)
    np.testing.assert_array_equal(P, expected)
    # and it is (L^T + I) applied to every row, L the strict lower triangle
    L = np.tril(K, -1)
    np.testing.assert_allclose(P, M @ (L + np.eye(n)), rtol=1e-12, atol=1e-12)


def test_trmm_rows_refuses_arrays_it_cannot_hand_to_blas():
    K = _symmetric(10, 0)
    with pytest.raises(ValueError, match="P must be a C-ordered 2-D float64 array"):
        _trmm.trmm_rows(K, np.ones((3, 10), dtype=np.float32))
    with pytest.raises(ValueError, match="K must be a C-ordered 2-D float64 array"):
        _trmm.trmm_rows(np.asfortranarray(K), np.ones((3, 10)))
    with pytest.raises(ValueError, match="P must have as many columns as K"):
        _trmm.trmm_rows(K, np.ones((3, 9)))
    P = np.ones((0, 10))
    _trmm.trmm_rows(K, P)  # no rows: nothing to do
    assert P.shape == (0, 10)


@pytest.mark.parametrize("n_rows", [1, 95, 96, 97, 2001, 4999])
@pytest.mark.parametrize("n_threads", [1, 2, 3, 16])
def test_row_blocks_are_aligned_and_cover_the_rows(n_rows, n_threads):
    blocks = _trmm.row_blocks(n_rows, n_threads)
    assert blocks[0][0] == 0 and blocks[-1][1] == n_rows
    assert all(b0[1] == b1[0] for b0, b1 in zip(blocks[:-1], blocks[1:], strict=True))
    assert all(r0 % _trmm.ROW_ALIGN == 0 and r1 > r0 for r0, r1 in blocks)
    assert len(blocks) <= n_threads
    assert all(r1 - r0 >= _trmm.MIN_ROWS_PER_THREAD for r0, r1 in blocks) or len(blocks) == 1


@pytest.mark.parametrize("n, c", [(333, 1000), (1000, 301), (257, 499)])
def test_quadratic_forms_do_not_depend_on_the_number_of_threads(n, c, monkeypatch):
    # Block edges at multiples of ROW_ALIGN: every row sits at the same position
    # modulo BLAS's register blocks, so each value is the same bit for bit.
    K = _symmetric(n, 2)
    masks = np.random.default_rng(3).random((c, n)) < 0.4
    rows = _mmd._MaskRows(masks, 1 / 40, -1 / 60)
    results = []
    for threads in (1, 2, 3, 5):
        monkeypatch.setattr(_mmd, "map_row_blocks", lambda f, r, t=threads:
                            _trmm.map_row_blocks(f, r, n_threads=t))
        results.append(_mmd.triangular_quadratic_forms(K, rows))
    for q in results[1:]:
        np.testing.assert_array_equal(q, results[0])
    V = rows.dense().T
    np.testing.assert_allclose(results[0], np.einsum("ij,ij->j", V, K @ V), rtol=1e-10)


def test_the_gil_free_entry_point_is_found_and_its_fallback_gives_the_same_forms(monkeypatch):
    # this scipy exposes dtrmm with the LP64 signature the ctypes prototype assumes
    assert _trmm._dtrmm() is not None
    assert _trmm._SIGNATURE.fullmatch(
        b"void (char *, char *, char *, char *, int *, int *, double *, double *, int *, "
        b"double *, int *)")
    assert not _trmm._SIGNATURE.fullmatch(  # 64-bit integers: not ours to call
        b"void (char *, char *, char *, char *, long *, long *, double *, double *, long *, "
        b"double *, long *)")
    K = _symmetric(300, 4)
    masks = np.random.default_rng(5).random((250, 300)) < 0.5
    rows = _mmd._MaskRows(masks, 1 / 150, -1 / 150)
    with threadpool_limits(1, "blas"):
        fast = _mmd.triangular_quadratic_forms(K, rows)
        monkeypatch.setitem(_trmm._CACHE, "dtrmm", None)  # scipy's f2py wrapper instead
        slow = _mmd.triangular_quadratic_forms(K, rows)
    np.testing.assert_array_equal(fast, slow)
