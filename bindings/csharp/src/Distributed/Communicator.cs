// SPDX-License-Identifier: BSD-3-Clause
// The communicator interface for tensor parallelism, over libmlcomm.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;
using MLFramework.Communication;
using MLFramework.Communication.Native;

namespace MLFramework.Distributed.Communication
{
    public enum ReduceOperation { Sum, Max, Min, Product, Avg }

    public interface ICommunicator : IDisposable
    {
        int WorldSize { get; }
        int Rank { get; }
        /// <summary>All-reduce: every rank receives op over all ranks' tensors (a new tensor).</summary>
        Task<Tensor> AllReduceAsync(Tensor tensor, ReduceOperation operation = ReduceOperation.Sum);
        /// <summary>All-gather: the shards of every rank concatenated along dim, in rank order.</summary>
        Task<Tensor> AllGatherAsync(Tensor tensor, int dim = 0);
        /// <summary>Reduce-scatter along dimension 0: rank r receives part r (mlcomm's even split).</summary>
        Task<Tensor> ReduceScatterAsync(Tensor tensor, ReduceOperation operation = ReduceOperation.Sum);
        /// <summary>Broadcast in place: every rank's tensor receives root's; the task yields that tensor.</summary>
        Task<Tensor> BroadcastAsync(Tensor tensor, int root);
        Task BarrierAsync();
    }

    /// <summary>
    /// Base of the communicators: one mlcomm communicator and its completion
    /// pump. Operations may be submitted from any thread, any number at once;
    /// they run in submission order, and each Task completes when mlcomm
    /// completes the operation (errors: CommunicationException).
    /// </summary>
    public abstract class CommunicatorBackend : ICommunicator
    {
        protected readonly int _worldSize;
        protected readonly int _rank;
        internal readonly CommEngine Engine;
        private bool _disposed;

        internal CommunicatorBackend(CommEngine engine)
        {
            Engine = engine;
            _worldSize = engine.Size;
            _rank = engine.Rank;
        }

        public int WorldSize { get { return _worldSize; } }
        public int Rank { get { return _rank; } }
        /// <summary>The mlcomm backend serving this communicator ("shm", "threads", ...).</summary>
        public string BackendName { get { return Engine.Backend; } }
        /// <summary>Where this communicator's buffers may live besides host memory (mlc_comm_memory).</summary>
        public MemoryKind Memory { get { return Engine.Memory; } }
        /// <summary>The GPU its device-memory work runs on; -1 for host memory only (mlc_comm_device).</summary>
        public int Device { get { return Engine.Device; } }
        /// <summary>Operations submitted and not yet completed.</summary>
        public int PendingOperations { get { return Engine.InFlight; } }

        internal static ReduceOp Map(ReduceOperation op)
        {
            switch (op)
            {
                case ReduceOperation.Sum: return ReduceOp.Sum;
                case ReduceOperation.Max: return ReduceOp.Max;
                case ReduceOperation.Min: return ReduceOp.Min;
                case ReduceOperation.Product: return ReduceOp.Product;
                case ReduceOperation.Avg: return ReduceOp.Avg;
            }
            throw new ArgumentException("unknown reduce operation " + (int)op);
        }

        private void Live() { if (_disposed) throw new ObjectDisposedException(GetType().Name); }

        public virtual Task<Tensor> AllReduceAsync(Tensor tensor, ReduceOperation operation = ReduceOperation.Sum)
        { Live(); return Ops.AllReduce(Engine, tensor, null, Map(operation)); }
        public virtual Task<Tensor> AllGatherAsync(Tensor tensor, int dim = 0)
        { Live(); return Ops.AllGather(Engine, tensor, null, dim); }
        public virtual Task<Tensor> ReduceScatterAsync(Tensor tensor, ReduceOperation operation = ReduceOperation.Sum)
        { Live(); return Ops.ReduceScatter(Engine, tensor, null, Map(operation), 0); }
        public virtual Task<Tensor> BroadcastAsync(Tensor tensor, int root)
        { Live(); return Ops.Broadcast(Engine, tensor, root); }
        public virtual Task BarrierAsync() { Live(); return Ops.Barrier(Engine); }

        /// <summary>All-gather into a given output (uneven shards: its dim is the sum over ranks).</summary>
        public Task<Tensor> AllGatherAsync(Tensor tensor, Tensor output, int dim)
        { Live(); return Ops.AllGather(Engine, tensor, output, dim); }
        /// <summary>Reduce-scatter along any dimension, optionally into a given output (uneven parts).</summary>
        public Task<Tensor> ReduceScatterAsync(Tensor tensor, ReduceOperation operation, int dim, Tensor output = null)
        { Live(); return Ops.ReduceScatter(Engine, tensor, output, Map(operation), dim); }
        /// <summary>All-reduce into a given output (output == tensor is in place).</summary>
        public Task<Tensor> AllReduceAsync(Tensor tensor, Tensor output, ReduceOperation operation)
        { Live(); return Ops.AllReduce(Engine, tensor, output, Map(operation)); }

        /// <summary>Fail every pending and later operation on every rank (from any thread).</summary>
        public void Abort() { Engine.Abort(); }

        /// <summary>A communicator of the ranks passing the same color, ordered by key (collective).</summary>
        public Task<ICommunicator> SplitAsync(int color, int key)
        {
            Live();
            return Engine.Call<ICommunicator>(comm =>
            {
                IntPtr sub;
                CommunicationException.Check(Mlc.mlc_comm_split(comm, color, key, out sub));
                return sub == IntPtr.Zero ? null : new MlcommCommunicator(new CommEngine(sub));
            });
        }

        /// <summary>
        /// Waits until every submitted operation completed (each is bounded by
        /// the timeout), then frees the mlcomm communicator.
        /// </summary>
        public virtual void Dispose()
        {
            if (_disposed) return;
            _disposed = true;
            Engine.Dispose();
        }
    }

    /// <summary>A communicator on any mlcomm backend (what CommunicatorFactory.Create returns).</summary>
    public class MlcommCommunicator : CommunicatorBackend
    {
        internal MlcommCommunicator(CommEngine engine) : base(engine) { }
    }

    /// <summary>
    /// Ranks as threads of this process (mlcomm's `threads` backend): each
    /// thread constructs the communicator of its rank; construction returns
    /// once all worldSize ranks of the group have joined.
    /// </summary>
    public class MockCommunicator : MlcommCommunicator
    {
        public MockCommunicator(int worldSize, int rank)
            : this(worldSize, rank, null) { }
        public MockCommunicator(int worldSize, int rank, Dictionary<string, object> config)
            : base(new CommEngine(CommunicatorFactory.JoinThreads(worldSize, rank, config))) { }
        internal MockCommunicator(CommEngine e) : base(e) { }
    }

    /// <summary>One GPU per rank over NCCL (mlcomm's `nccl` backend; rank and size from the launcher).</summary>
    public class NCCLCommunicator : MlcommCommunicator
    {
        public NCCLCommunicator(int worldSize, int rank, int device)
            : base(new CommEngine(CommunicatorFactory.CreateOne("nccl", new Dictionary<string, object> {
                { "world_size", worldSize }, { "rank", rank }, { "local_rank", device } }))) { }
    }

    public static class CommunicatorFactory
    {
        private sealed class ThreadGroup { internal IntPtr Uid; internal int Joined; }
        private static readonly Dictionary<string, ThreadGroup> _groups = new Dictionary<string, ThreadGroup>();

        /// <summary>
        /// A communicator on `backend`: "mock" (= "threads": ranks are threads of
        /// this process; config "world_size", "rank", optional "group" naming
        /// the group when several form at once), "shm", "mpi", "nccl", "rccl" or
        /// "auto" (rank and size from the launcher, e.g. mlcomm-run or mpirun).
        /// Other config keys are mlcomm options: timeout, job_id, log_level,
        /// log_file, profile, memory, mpi_thread_level, cma, algo_&lt;collective&gt;.
        /// </summary>
        public static ICommunicator Create(string backend = "mock", Dictionary<string, object> config = null)
        {
            NativeLoader.Ensure();
            if (backend == null) throw new ArgumentNullException("backend");
            string b = backend.ToLowerInvariant();
            if (b == "mock" || b == "threads")
            {
                int world = GetInt(config, "world_size", 1), rank = GetInt(config, "rank", 0);
                return new MockCommunicator(new CommEngine(JoinThreads(world, rank, config)));
            }
            return new MlcommCommunicator(new CommEngine(CreateOne(b, config)));
        }

        /// <summary>
        /// Rank `rank` of a communicator of worldSize ranks that meet through
        /// `store` (mlc_comm_init_store): collective over the worldSize callers,
        /// which may be threads of this process or processes on any hosts. The
        /// backend is `backend` (null: MLC_BACKEND, else threads when every
        /// rank is a thread of this process, else auto's choice); timeoutSeconds
        /// (negative: MLC_TIMEOUT or 600 s) bounds every wait, on the store too.
        /// A store method that throws fails the call with a CommunicationException
        /// (MLC_ERR_BACKEND) naming the method, the key and the exception, which
        /// is its InnerException. A store holds one communicator's keys.
        /// </summary>
        public static ICommunicator FromStore(IKeyValueStore store, int worldSize, int rank,
                                              string backend = null, double timeoutSeconds = -1)
        {
            NativeLoader.Ensure();
            if (store == null) throw new ArgumentNullException("store");
            return new MlcommCommunicator(new CommEngine(InitStore(store, worldSize, rank, backend, timeoutSeconds)));
        }

        private static IntPtr InitStore(IKeyValueStore store, int worldSize, int rank, string backend, double timeoutSeconds)
        {
            var callbacks = new StoreCallbacks(store);
            var native = callbacks.Native();
            var cfg = MlcConfig.Init();
            IntPtr name = backend != null ? System.Runtime.InteropServices.Marshal.StringToHGlobalAnsi(backend) : IntPtr.Zero;
            try
            {
                cfg.Backend = name;
                if (timeoutSeconds >= 0) cfg.TimeoutS = timeoutSeconds;
                IntPtr comm;
                int st = Mlc.mlc_comm_init_store(ref native, worldSize, rank, ref cfg, out comm);
                GC.KeepAlive(callbacks); // its delegates are the callbacks native code held until now
                if (st != Mlc.Success)
                {
                    string msg = Mlc.LastError();
                    if (callbacks.Failure != null) throw new CommunicationException(st, msg + " (" + callbacks.FailureWhere + ")", callbacks.Failure);
                    throw new CommunicationException(st, msg);
                }
                return comm;
            }
            finally
            {
                if (name != IntPtr.Zero) System.Runtime.InteropServices.Marshal.FreeHGlobal(name);
            }
        }

        /// <summary>Every rank of a threads communicator at once; element i is rank i (use each from its own thread or tasks).</summary>
        public static ICommunicator[] CreateAll(int worldSize, Dictionary<string, object> config = null)
        {
            NativeLoader.Ensure();
            if (worldSize < 1) throw new ArgumentOutOfRangeException("worldSize", worldSize, "a communicator has at least one rank");
            return CreateAllNative(worldSize, config);
        }

        private static ICommunicator[] CreateAllNative(int worldSize, Dictionary<string, object> config)
        {
            var opts = Options(config, "world_size", "rank", "group");
            opts["world_size"] = worldSize.ToString();
            IntPtr[] comms = Native(opts, "threads", IntPtr.Zero, worldSize);
            return comms.Select(c => (ICommunicator)new MockCommunicator(new CommEngine(c))).ToArray();
        }

        internal static int GetInt(Dictionary<string, object> config, string key, int dflt)
        {
            object v;
            if (config == null || !config.TryGetValue(key, out v) || v == null) return dflt;
            try { return Convert.ToInt32(v, System.Globalization.CultureInfo.InvariantCulture); }
            catch (Exception e) { throw new ArgumentException("config \"" + key + "\" = " + v + " is not an integer", e); }
        }

        private static Dictionary<string, string> Options(Dictionary<string, object> config, params string[] skip)
        {
            var o = new Dictionary<string, string>();
            if (config == null) return o;
            foreach (var kv in config)
            {
                if (skip.Contains(kv.Key) || kv.Value == null) continue;
                o[kv.Key] = Convert.ToString(kv.Value, System.Globalization.CultureInfo.InvariantCulture);
            }
            return o;
        }

        internal static IntPtr CreateOne(string backend, Dictionary<string, object> config)
        {
            NativeLoader.Ensure();
            return Native(Options(config), backend, IntPtr.Zero, 1)[0];
        }

        private static IntPtr[] Native(Dictionary<string, string> opts, string backend, IntPtr uid, int capacity)
        {
            var arr = new MlcOption[opts.Count];
            var strings = new List<IntPtr>();
            try
            {
                int i = 0;
                foreach (var kv in opts)
                {
                    IntPtr k = System.Runtime.InteropServices.Marshal.StringToHGlobalAnsi(kv.Key);
                    IntPtr v = System.Runtime.InteropServices.Marshal.StringToHGlobalAnsi(kv.Value);
                    strings.Add(k); strings.Add(v);
                    arr[i].Key = k; arr[i].Value = v; i++;
                }
                var comms = new IntPtr[capacity];
                int n;
                int st = Mlc.mlc_comm_create_from(backend == "auto" ? "auto" : backend, arr, (UIntPtr)(ulong)arr.Length, uid, capacity, comms, out n);
                CommunicationException.Check(st);
                return comms.Take(n).ToArray();
            }
            finally
            {
                foreach (var p in strings) System.Runtime.InteropServices.Marshal.FreeHGlobal(p);
            }
        }

        /// <summary>Join rank `rank` of a group of worldSize threads of this process.</summary>
        internal static IntPtr JoinThreads(int worldSize, int rank, Dictionary<string, object> config)
        {
            NativeLoader.Ensure();
            return JoinThreadsNative(worldSize, rank, config);
        }

        private static IntPtr JoinThreadsNative(int worldSize, int rank, Dictionary<string, object> config)
        {
            if (worldSize < 1) throw new ArgumentException("world_size " + worldSize + " < 1");
            if (rank < 0 || rank >= worldSize) throw new ArgumentException("rank " + rank + " is outside 0.." + (worldSize - 1));
            var opts = Options(config, "world_size", "rank", "group");
            if (worldSize == 1) return Native(opts, "threads", IntPtr.Zero, 1)[0];
            object g = null;
            if (config != null) config.TryGetValue("group", out g);
            string key = (g ?? "") + "/" + worldSize;
            IntPtr uid;
            lock (_groups)
            {
                ThreadGroup grp;
                if (!_groups.TryGetValue(key, out grp))
                {
                    grp = new ThreadGroup { Uid = System.Runtime.InteropServices.Marshal.AllocHGlobal(128) };
                    CommunicationException.Check(Mlc.mlc_get_unique_id(grp.Uid));
                    _groups[key] = grp;
                }
                uid = System.Runtime.InteropServices.Marshal.AllocHGlobal(128);
                unsafe { Buffer.MemoryCopy((void*)grp.Uid, (void*)uid, 128, 128); }
                if (++grp.Joined == worldSize)
                {
                    _groups.Remove(key); // the next group of this key gets a fresh id
                    System.Runtime.InteropServices.Marshal.FreeHGlobal(grp.Uid);
                }
            }
            try
            {
                opts["world_size"] = worldSize.ToString();
                opts["rank"] = rank.ToString();
                return Native(opts, "threads", uid, 1)[0];
            }
            finally { System.Runtime.InteropServices.Marshal.FreeHGlobal(uid); }
        }
    }

    /// <summary>
    /// A real subgroup: a communicator of the listed ranks of globalComm (by
    /// mlc_comm_split). Every rank of globalComm constructs it with the same
    /// list (a collective); ranks outside the list get IsMember == false.
    /// </summary>
    public class ProcessGroup : ICommunicator
    {
        private readonly ICommunicator _globalCommunicator;
        private readonly List<int> _ranks;
        private readonly int _localRank;
        private readonly Dictionary<int, int> _globalToLocalRank;
        private readonly ICommunicator _sub;

        public ProcessGroup(ICommunicator globalComm, List<int> ranks, int myGlobalRank)
        {
            if (globalComm == null) throw new ArgumentNullException("globalComm");
            if (ranks == null) throw new ArgumentNullException("ranks");
            var backend = globalComm as CommunicatorBackend;
            if (backend == null) throw new ArgumentException("globalComm must be a communicator of this binding (CommunicatorFactory.Create)");
            if (myGlobalRank != globalComm.Rank)
                throw new ArgumentException("myGlobalRank " + myGlobalRank + " is not this process's rank " + globalComm.Rank + " in globalComm");
            _globalToLocalRank = new Dictionary<int, int>();
            for (int i = 0; i < ranks.Count; i++)
            {
                int r = ranks[i];
                if (r < 0 || r >= globalComm.WorldSize) throw new ArgumentException("rank " + r + " is outside 0.." + (globalComm.WorldSize - 1));
                if (_globalToLocalRank.ContainsKey(r)) throw new ArgumentException("rank " + r + " is listed twice");
                _globalToLocalRank[r] = i;
            }
            _globalCommunicator = globalComm;
            _ranks = new List<int>(ranks);
            int local;
            _localRank = _globalToLocalRank.TryGetValue(myGlobalRank, out local) ? local : -1;
            _sub = CommEngine.Wait(backend.SplitAsync(_localRank >= 0 ? 0 : Mlc.Undefined, _localRank));
        }

        public bool IsMember { get { return _sub != null; } }
        public int WorldSize { get { return _ranks.Count; } }
        public int LocalRank { get { return _localRank; } }
        public int Rank { get { return _localRank; } }
        public IReadOnlyList<int> Ranks { get { return _ranks; } }
        public ICommunicator GlobalCommunicator { get { return _globalCommunicator; } }
        public int ToLocalRank(int globalRank) { int l; return _globalToLocalRank.TryGetValue(globalRank, out l) ? l : -1; }
        public int ToGlobalRank(int localRank) { return _ranks[localRank]; }

        private ICommunicator Sub()
        {
            if (_sub == null) throw new InvalidOperationException("rank " + _globalCommunicator.Rank + " is not a member of the process group [" + string.Join(", ", _ranks) + "]");
            return _sub;
        }
        public Task<Tensor> AllReduceAsync(Tensor tensor, ReduceOperation operation = ReduceOperation.Sum) { return Sub().AllReduceAsync(tensor, operation); }
        public Task<Tensor> AllGatherAsync(Tensor tensor, int dim = 0) { return Sub().AllGatherAsync(tensor, dim); }
        public Task<Tensor> ReduceScatterAsync(Tensor tensor, ReduceOperation operation = ReduceOperation.Sum) { return Sub().ReduceScatterAsync(tensor, operation); }
        /// <summary>root is a rank of the group (local numbering).</summary>
        public Task<Tensor> BroadcastAsync(Tensor tensor, int root) { return Sub().BroadcastAsync(tensor, root); }
        public Task BarrierAsync() { return Sub().BarrierAsync(); }
        public void Dispose() { if (_sub != null) _sub.Dispose(); }
    }
}
