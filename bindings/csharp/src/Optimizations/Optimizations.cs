// SPDX-License-Identifier: BSD-3-Clause
// Pinned memory, shared host memory, GPU-direct detection, algorithm
// selection and profiling, each backed by libmlcomm (its pinned pool,
// mlc_mem_alloc, its detection, its selector and its per-collective
// statistics).
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using MLFramework.Communication.Backends;
using MLFramework.Communication.Native;
using MLFramework.Distributed.Communication;

namespace MLFramework.Communication.Optimizations
{
    /// <summary>
    /// Pinned (page-locked) host memory with a byte limit, over mlcomm's pinned
    /// pool: tensors pinned in place, and pinned buffers whose freed blocks are
    /// cached and evicted least recently freed first when the limit is reached.
    /// Pins through cudaHostRegister/hipHostRegister when a GPU runtime is
    /// loaded, else mlock. Thread-safe.
    /// </summary>
    public class PinnedMemoryManager : IDisposable
    {
        private IntPtr _pool;
        private readonly object _lock = new object();
        private readonly HashSet<PinnedMemoryHandle> _live = new HashSet<PinnedMemoryHandle>();

        /// <param name="maxPinnedBytes">Maximum bytes to pin (default: 1 GB).</param>
        public PinnedMemoryManager(long maxPinnedBytes = 1024 * 1024 * 1024)
        {
            if (maxPinnedBytes <= 0) throw new ArgumentException("maxPinnedBytes must be > 0, got " + maxPinnedBytes);
            NativeLoader.Ensure();
            _pool = Open(maxPinnedBytes);
        }

        private static IntPtr Open(long maxPinnedBytes)
        {
            IntPtr pool;
            CommunicationException.Check(Mlc.mlc_pinned_pool_open((UIntPtr)(ulong)maxPinnedBytes, out pool));
            return pool;
        }

        private IntPtr Pool { get { if (_pool == IntPtr.Zero) throw new ObjectDisposedException("PinnedMemoryManager"); return _pool; } }

        private MlcPinnedInfo Info()
        {
            MlcPinnedInfo i;
            CommunicationException.Check(Mlc.mlc_pinned_pool_info(Pool, out i));
            return i;
        }

        /// <summary>Bytes pinned now (in use, cached for reuse, and tensors pinned in place).</summary>
        public long TotalPinnedBytes { get { return (long)(ulong)Info().BytesPinned; } }
        public long BytesInUse { get { return (long)(ulong)Info().BytesInUse; } }
        public long BytesCached { get { return (long)(ulong)Info().BytesCached; } }
        public long MaxPinnedBytes { get { return (long)(ulong)Info().Limit; } }
        public long CacheHits { get { return (long)Info().Hits; } }
        public long Evictions { get { return (long)Info().Evictions; } }
        /// <summary>"cuda", "hip" or "mlock".</summary>
        public string Mode { get { return Mlc.Str(Info().Mode); } }
        /// <summary>Handles not yet disposed.</summary>
        public int LiveHandles { get { lock (_lock) return _live.Count; } }

        /// <summary>Pin a tensor's memory in place (it stays fixed until the handle is disposed).</summary>
        public PinnedMemoryHandle PinMemory<T>(Tensor<T> tensor) where T : struct
        {
            if (tensor == null) throw new ArgumentNullException("tensor");
            if (tensor.Device != DeviceType.CPU) throw new ArgumentException("only host memory can be pinned; the tensor is on " + tensor.Device);
            long bytes = tensor.ByteSize;
            if (bytes == 0) throw new ArgumentException("an empty tensor has nothing to pin");
            IntPtr p = tensor.Storage.Acquire();
            int st = Mlc.mlc_pinned_pool_pin(Pool, p, (UIntPtr)(ulong)bytes);
            if (st != Mlc.Success)
            {
                string msg = Mlc.LastError();
                tensor.Storage.Release();
                throw new CommunicationException(st, msg);
            }
            return Track(new PinnedMemoryHandle(p, bytes, this, tensor.Storage));
        }

        /// <summary>A pinned buffer of at least `bytes` from the pool (freed blocks are reused).</summary>
        public PinnedMemoryHandle Allocate(long bytes)
        {
            if (bytes <= 0) throw new ArgumentException("bytes must be > 0, got " + bytes);
            IntPtr p;
            CommunicationException.Check(Mlc.mlc_pinned_pool_alloc(Pool, (UIntPtr)(ulong)bytes, out p));
            return Track(new PinnedMemoryHandle(p, bytes, this, null));
        }

        private PinnedMemoryHandle Track(PinnedMemoryHandle h) { lock (_lock) _live.Add(h); return h; }

        internal void Unpin(PinnedMemoryHandle h)
        {
            lock (_lock)
            {
                if (!_live.Remove(h)) return;
                if (_pool != IntPtr.Zero)
                {
                    int st = h.Storage != null ? Mlc.mlc_pinned_pool_unpin(_pool, h.Pointer) : Mlc.mlc_pinned_pool_release(_pool, h.Pointer);
                    if (h.Storage != null) h.Storage.Release();
                    CommunicationException.Check(st);
                }
            }
        }

        /// <summary>Unpin everything (handles still alive become invalid) and close the pool.</summary>
        public void Dispose()
        {
            lock (_lock)
            {
                if (_pool == IntPtr.Zero) return;
                foreach (var h in _live) if (h.Storage != null) { Mlc.mlc_pinned_pool_unpin(_pool, h.Pointer); h.Storage.Release(); }
                _live.Clear();
                Mlc.mlc_pinned_pool_close(_pool);
                _pool = IntPtr.Zero;
            }
        }
    }

    /// <summary>
    /// Host memory that the other ranks of this host read in place (mlc_mem_alloc,
    /// as MPI_Alloc_mem): on the shm backend large collectives over such tensors
    /// copy nothing through shared memory. Results of collectives over it are
    /// shared storage too. Dispose frees the block (a finalizer does, if not).
    /// </summary>
    public sealed class SharedHostStorage : ITensorStorage, IDisposable
    {
        private IntPtr _ptr;
        private readonly long _bytes;

        public SharedHostStorage(long bytes)
        {
            if (bytes < 0) throw new ArgumentException("bytes must be >= 0, got " + bytes);
            NativeLoader.Ensure();
            CommunicationException.Check(Mlc.mlc_mem_alloc((UIntPtr)(ulong)bytes, out _ptr));
            _bytes = bytes;
        }
        ~SharedHostStorage() { Free(); }

        public DeviceType Device { get { return DeviceType.CPU; } }
        public int DeviceIndex { get { return -1; } }
        public long ByteLength { get { return _bytes; } }
        public Array ManagedArray { get { return null; } }
        public IntPtr Acquire()
        {
            if (_ptr == IntPtr.Zero) throw new ObjectDisposedException("SharedHostStorage");
            return _ptr;
        }
        public void Release() { }
        public ITensorStorage AllocateLike(long bytes) { return new SharedHostStorage(bytes); }
        public void Dispose() { Free(); GC.SuppressFinalize(this); }
        private void Free()
        {
            IntPtr p = Interlocked.Exchange(ref _ptr, IntPtr.Zero);
            if (p != IntPtr.Zero) Mlc.mlc_mem_free(p);
        }
    }

    /// <summary>Pinned memory: a tensor pinned in place, or a buffer of the pool.</summary>
    public class PinnedMemoryHandle : IDisposable
    {
        private readonly PinnedMemoryManager _manager;
        private bool _disposed;
        public IntPtr Pointer { get; private set; }
        public long Size { get; private set; }
        internal ITensorStorage Storage { get; private set; }
        internal PinnedMemoryHandle(IntPtr ptr, long size, PinnedMemoryManager manager, ITensorStorage storage)
        {
            Pointer = ptr; Size = size; _manager = manager; Storage = storage;
        }
        public void Dispose()
        {
            if (_disposed) return;
            _disposed = true;
            _manager.Unpin(this);
        }
    }

    /// <summary>One GPU-direct capability: yes, no or unknown, and the evidence it was decided on.</summary>
    public struct Capability
    {
        /// <summary>true, false, or null when it cannot be told (no runtime to ask).</summary>
        public bool? Supported { get; private set; }
        public string Evidence { get; private set; }
        internal Capability(int v, string why) : this() { Supported = v < 0 ? (bool?)null : v != 0; Evidence = why ?? ""; }
        public override string ToString() { return (Supported.HasValue ? (Supported.Value ? "yes" : "no") : "unknown") + " (" + Evidence + ")"; }
    }

    /// <summary>GPU-direct capabilities of this machine, detected by libmlcomm.</summary>
    public static class GPUDirectManager
    {
        private static readonly Lazy<MlcGpuDirectInfo> _info = new Lazy<MlcGpuDirectInfo>(Query);
        private static Capability _rdma, _peer, _mpi, _ipc;

        private static MlcGpuDirectInfo Query()
        {
            NativeLoader.Ensure();
            return QueryNative();
        }

        private static MlcGpuDirectInfo QueryNative()
        {
            MlcGpuDirectInfo i;
            CommunicationException.Check(Mlc.mlc_gpudirect_query(out i));
            _rdma = new Capability(i.Rdma, Mlc.Str(i.RdmaEvidence));
            _peer = new Capability(i.PeerAccess, Mlc.Str(i.PeerEvidence));
            _mpi = new Capability(i.CudaAwareMpi, Mlc.Str(i.MpiEvidence));
            _ipc = new Capability(i.Ipc, Mlc.Str(i.IpcEvidence));
            return i;
        }

        /// <summary>GPUDirect RDMA: a NIC reads and writes GPU memory (peer-memory module and an RDMA device).</summary>
        public static Capability Rdma { get { var _ = _info.Value; return _rdma; } }
        /// <summary>GPUs of this host access each other's memory.</summary>
        public static Capability PeerAccess { get { var _ = _info.Value; return _peer; } }
        /// <summary>The MPI library takes device pointers (known once the mpi backend has run in this process).</summary>
        public static Capability CudaAwareMpi { get { var _ = _info.Value; return _mpi; } }
        /// <summary>Processes of this host map each other's device memory.</summary>
        public static Capability Ipc { get { var _ = _info.Value; return _ipc; } }
        /// <summary>GPU-direct between hosts: GPUDirect RDMA is available.</summary>
        public static bool IsSupported { get { return Rdma.Supported == true; } }

        /// <summary>
        /// Let the backend's communicators created from now on move GPU memory
        /// directly: NCCL/RCCL over InfiniBand with GPUDirect RDMA
        /// (NCCL_IB_DISABLE=0, NCCL_NET_GDR_LEVEL=SYS), MPI by handing device
        /// buffers to MPI (MLC_MPI_CUDA_AWARE=1).
        /// </summary>
        public static void EnableGPUDirect(ICommunicationBackend backend)
        {
            if (backend == null) throw new ArgumentNullException("backend");
            if (!IsSupported) throw new CommunicationException("GPU-direct is not supported on this system: " + Rdma.Evidence);
            if (backend is NCCLBackend || backend is RCCLBackend)
            {
                RCCLConfig.SetEnvironmentVariable("NCCL_IB_DISABLE", "0");
                RCCLConfig.SetEnvironmentVariable("NCCL_NET_GDR_LEVEL", "SYS");
            }
            else if (backend is MPIBackend) Environment.SetEnvironmentVariable("MLC_MPI_CUDA_AWARE", "1");
            else throw new ArgumentException("GPU-direct applies to the MPI, NCCL and RCCL backends, not " + backend.BackendName);
        }
    }

    public enum CommunicationAlgorithm
    {
        Ring, Tree, RecursiveDoubling, Rabenseifner, Automatic,
        Binomial, DoubleBinaryTree, Bruck, RecursiveHalving, Pairwise, Linear, ScatterAllGather, Dissemination,
        /// <summary>The backend library's own (NCCL, MPI).</summary>
        Native
    }

    /// <summary>The library's algorithm selector for one communicator (its choice depends on the backend, the ranks and the size).</summary>
    public class AlgorithmSelector
    {
        private readonly CommunicatorBackend _comm;
        private readonly CommunicationConfig _config;

        public AlgorithmSelector(ICommunicator communicator, CommunicationConfig config = null)
        {
            _comm = communicator as CommunicatorBackend;
            if (_comm == null) throw new ArgumentException("the selector needs a communicator of this binding (CommunicatorFactory.Create)");
            _config = config ?? new CommunicationConfig();
        }
        public AlgorithmSelector(MlcommBackend backend, CommunicationConfig config = null) : this(backend.Communicator, config ?? backend.Config) { }

        public int WorldSize { get { return _comm.WorldSize; } }
        public CommunicationConfig Config { get { return _config; } }

        private const int Broadcast = 0, Reduce = 1, AllReduce = 2, AllGather = 3, ReduceScatter = 5;

        /// <summary>The name mlcomm's selector gives for collective `coll` (mlc_coll_t) and bytes per rank.</summary>
        public string AlgorithmName(int coll, long dataSizeBytes)
        {
            if (dataSizeBytes < 0) throw new ArgumentException("negative size " + dataSizeBytes);
            return CommEngine.Wait(_comm.Engine.Call(c =>
            {
                IntPtr name;
                CommunicationException.Check(Mlc.mlc_comm_get_algo(c, coll, (UIntPtr)(ulong)dataSizeBytes, out name));
                return Mlc.Str(name);
            }));
        }

        public CommunicationAlgorithm SelectAllReduceAlgorithm(long dataSizeBytes) { return Parse(AlgorithmName(AllReduce, dataSizeBytes)); }
        public CommunicationAlgorithm SelectAllGatherAlgorithm(long dataSizeBytes) { return Parse(AlgorithmName(AllGather, dataSizeBytes)); }
        public CommunicationAlgorithm SelectReduceScatterAlgorithm(long dataSizeBytes) { return Parse(AlgorithmName(ReduceScatter, dataSizeBytes)); }
        public CommunicationAlgorithm SelectBroadcastAlgorithm(long dataSizeBytes) { return Parse(AlgorithmName(Broadcast, dataSizeBytes)); }

        /// <summary>
        /// Force all-reduce's algorithm on this rank (Automatic clears). Call
        /// it with the same argument on every rank before the next all-reduce.
        /// </summary>
        public void ForceAllReduceAlgorithm(CommunicationAlgorithm algorithm) { Force(AllReduce, algorithm); }

        public void Force(int coll, CommunicationAlgorithm algorithm)
        {
            string name = LibraryName(algorithm);
            CommEngine.Wait(_comm.Engine.Call(c => { CommunicationException.Check(Mlc.mlc_comm_set_algo(c, coll, name)); return true; }));
        }

        private static readonly Dictionary<string, CommunicationAlgorithm> _names = new Dictionary<string, CommunicationAlgorithm>
        {
            { "ring", CommunicationAlgorithm.Ring }, { "tree", CommunicationAlgorithm.Tree },
            { "rd", CommunicationAlgorithm.RecursiveDoubling }, { "rabenseifner", CommunicationAlgorithm.Rabenseifner },
            { "auto", CommunicationAlgorithm.Automatic }, { "binomial", CommunicationAlgorithm.Binomial },
            { "dbtree", CommunicationAlgorithm.DoubleBinaryTree }, { "bruck", CommunicationAlgorithm.Bruck },
            { "rhalving", CommunicationAlgorithm.RecursiveHalving }, { "pairwise", CommunicationAlgorithm.Pairwise },
            { "linear", CommunicationAlgorithm.Linear }, { "scatter_allgather", CommunicationAlgorithm.ScatterAllGather },
            { "dissemination", CommunicationAlgorithm.Dissemination }, { "native", CommunicationAlgorithm.Native },
        };

        public static CommunicationAlgorithm Parse(string name)
        {
            CommunicationAlgorithm a;
            if (name != null && _names.TryGetValue(name, out a)) return a;
            return CommunicationAlgorithm.Native; // a backend's own algorithm (MPI's, NCCL's)
        }

        public static string LibraryName(CommunicationAlgorithm a)
        {
            foreach (var kv in _names) if (kv.Value == a) return kv.Key;
            throw new ArgumentException("unknown algorithm " + a);
        }

        public static string GetAlgorithmName(CommunicationAlgorithm algorithm) { return algorithm.ToString(); }
    }

    /// <summary>Profile data for a communication operation (or, from the library, one kind of collective).</summary>
    public class CommunicationProfile
    {
        public string Operation { get; set; }
        public long DataSizeBytes { get; set; }
        public TimeSpan Duration { get; set; }
        public double BandwidthMBps { get; set; }
        public int NumRanks { get; set; }
        public string Algorithm { get; set; }
        public DateTime Timestamp { get; set; }
        /// <summary>Operations this entry sums (1 for one timed call; the library's count for its totals).</summary>
        public long Count { get; set; } = 1;

        public override string ToString()
        {
            return Operation + " (" + Algorithm + "): " + (DataSizeBytes / 1024.0 / 1024.0).ToString("F2") + " MB, " +
                   Duration.TotalMilliseconds.ToString("F2") + " ms, " + BandwidthMBps.ToString("F2") + " MB/s, " + NumRanks + " ranks";
        }
    }

    public class CommunicationProfileStatistics
    {
        public int TotalOperations { get; set; }
        public long TotalDataTransferred { get; set; }
        /// <summary>Milliseconds.</summary>
        public double TotalTime { get; set; }
        public double AverageBandwidth { get; set; }
        public double MinBandwidth { get; set; }
        public double MaxBandwidth { get; set; }
        public override string ToString()
        {
            return "Total Operations: " + TotalOperations + ", Total Data: " + (TotalDataTransferred / 1024.0 / 1024.0 / 1024.0).ToString("F2") +
                   " GB, Total Time: " + (TotalTime / 1000.0).ToString("F2") + " s, Avg Bandwidth: " + AverageBandwidth.ToString("F2") + " MB/s";
        }
    }

    /// <summary>
    /// Profiles communication: operations timed through Profile/ProfileAsync,
    /// and, attached to a communicator created with profiling on
    /// (CommunicationConfig.EnableProfiling, or option profile=stats), the
    /// library's own per-collective totals (LibraryProfiles).
    /// </summary>
    public class CommunicationProfiler : IDisposable
    {
        private readonly List<CommunicationProfile> _profiles = new List<CommunicationProfile>();
        private readonly object _lock = new object();
        private readonly bool _enabled;
        private readonly CommunicatorBackend _comm;

        public CommunicationProfiler(bool enabled = true) { _enabled = enabled; }
        public CommunicationProfiler(ICommunicator communicator) : this(true)
        {
            _comm = communicator as CommunicatorBackend;
            if (_comm == null) throw new ArgumentException("the profiler reads the statistics of a communicator of this binding");
        }

        public IReadOnlyList<CommunicationProfile> Profiles { get { lock (_lock) return _profiles.ToList(); } }

        private static double MBps(long bytes, TimeSpan d) { return d.TotalSeconds == 0 ? 0 : bytes / 1024.0 / 1024.0 / d.TotalSeconds; }

        private void Add(string operation, long bytes, TimeSpan d, int numRanks, string algorithm)
        {
            var p = new CommunicationProfile
            {
                Operation = operation, DataSizeBytes = bytes, Duration = d, BandwidthMBps = MBps(bytes, d),
                NumRanks = numRanks, Algorithm = algorithm, Timestamp = DateTime.Now
            };
            lock (_lock) _profiles.Add(p);
        }

        public T Profile<T>(string operation, long dataSizeBytes, Func<T> func, int numRanks = 0, string algorithm = "")
        {
            if (!_enabled) return func();
            var sw = Stopwatch.StartNew();
            T result = func();
            Add(operation, dataSizeBytes, sw.Elapsed, numRanks, algorithm);
            return result;
        }

        /// <summary>Times an operation from submission to the completion of its Task.</summary>
        public async Task<T> ProfileAsync<T>(string operation, long dataSizeBytes, Func<Task<T>> func, int numRanks = 0, string algorithm = "")
        {
            if (!_enabled) return await func().ConfigureAwait(false);
            var sw = Stopwatch.StartNew();
            T result = await func().ConfigureAwait(false);
            Add(operation, dataSizeBytes, sw.Elapsed, numRanks, algorithm);
            return result;
        }

        /// <summary>The library's per-collective totals for the attached communicator (empty when its profiling is off).</summary>
        public IReadOnlyList<CommunicationProfile> LibraryProfiles()
        {
            if (_comm == null) return new List<CommunicationProfile>();
            var stats = CommEngine.Wait(_comm.Engine.Call(c =>
            {
                var a = new MlcProfileStat[32];
                UIntPtr n = (UIntPtr)32;
                CommunicationException.Check(Mlc.mlc_profile_stats(c, a, ref n));
                return a.Take((int)(ulong)n).ToArray();
            }));
            return stats.Select(s => new CommunicationProfile
            {
                Operation = CollName(s.Coll), DataSizeBytes = (long)s.Bytes, Duration = TimeSpan.FromTicks((long)(s.TimeS * TimeSpan.TicksPerSecond)),
                BandwidthMBps = s.AvgGbps * 1e9 / (1024.0 * 1024.0), NumRanks = _comm.WorldSize, Algorithm = "", Timestamp = DateTime.Now,
                Count = (long)s.Count,
            }).ToList();
        }

        private static readonly string[] _colls = { "broadcast", "reduce", "allreduce", "allgather", "allgatherv", "reduce_scatter", "alltoall",
            "alltoallv", "gather", "gatherv", "scatter", "scatterv", "barrier", "send", "recv", "sendrecv" };
        private static string CollName(int c) { return c >= 0 && c < _colls.Length ? _colls[c] : "collective " + c; }

        public void Clear() { lock (_lock) _profiles.Clear(); }

        /// <summary>Statistics over the timed operations and the library's totals.</summary>
        public CommunicationProfileStatistics GetStatistics()
        {
            var all = Profiles.Concat(LibraryProfiles()).ToList();
            if (all.Count == 0) return new CommunicationProfileStatistics();
            return new CommunicationProfileStatistics
            {
                TotalOperations = (int)all.Sum(p => p.Count),
                TotalDataTransferred = all.Sum(p => p.DataSizeBytes),
                TotalTime = all.Sum(p => p.Duration.TotalMilliseconds),
                AverageBandwidth = all.Average(p => p.BandwidthMBps),
                MinBandwidth = all.Min(p => p.BandwidthMBps),
                MaxBandwidth = all.Max(p => p.BandwidthMBps),
            };
        }

        public void Dispose() { Clear(); }
    }
}
