// SPDX-License-Identifier: BSD-3-Clause
// The communication backends (MPI, RCCL, NCCL) over libmlcomm: blocking
// forms wait on the same pump operations the async forms return as handles.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Threading.Tasks;
using MLFramework.Communication.Native;

namespace MLFramework.Communication
{
    /// <summary>Settings common to every backend.</summary>
    public class CommunicationConfig
    {
        /// <summary>Seconds an operation may wait for peers (mlcomm "timeout"; 0 = never; null = MLC_TIMEOUT or the default).</summary>
        public double? TimeoutSeconds { get; set; }
        /// <summary>Accept device tensors (mlcomm memory "auto": staged through pinned host memory or handed to the backend as they are).</summary>
        public bool DeviceMemory { get; set; }
        /// <summary>Give the optimizer a PinnedMemoryManager (the library's pinned pool).</summary>
        public bool UsePinnedMemory { get; set; } = true;
        /// <summary>Collect per-collective statistics (mlcomm profile "stats"; CommunicationProfiler.FromBackend reads them).</summary>
        public bool EnableProfiling { get; set; }
        /// <summary>mlcomm log level "debug" instead of the default.</summary>
        public bool EnableLogging { get; set; }
        /// <summary>More mlcomm options (job_id, log_file, algo_allreduce, ...).</summary>
        public Dictionary<string, string> Options { get; } = new Dictionary<string, string>();

        internal Dictionary<string, object> ToOptions()
        {
            var o = new Dictionary<string, object>();
            if (TimeoutSeconds.HasValue) o["timeout"] = TimeoutSeconds.Value.ToString(CultureInfo.InvariantCulture);
            if (DeviceMemory) o["memory"] = "auto";
            if (EnableProfiling) o["profile"] = "stats";
            if (EnableLogging) o["log_level"] = "debug";
            foreach (var kv in Options) o[kv.Key] = kv.Value;
            return o;
        }
    }
}

namespace MLFramework.Communication.Backends
{
    using MLFramework.Distributed.Communication;

    public interface ICommunicationBackend : IDisposable
    {
        int Rank { get; }
        int WorldSize { get; }
        string BackendName { get; }
        DeviceType Device { get; }
        void Broadcast<T>(Tensor<T> tensor, int rootRank) where T : struct;
        /// <summary>The root gets the reduced tensor; the other ranks get their input back.</summary>
        Tensor<T> Reduce<T>(Tensor<T> tensor, ReduceOp operation, int rootRank) where T : struct;
        Tensor<T> AllReduce<T>(Tensor<T> tensor, ReduceOp operation) where T : struct;
        /// <summary>Concatenation along dimension 0 of every rank's tensor.</summary>
        Tensor<T> AllGather<T>(Tensor<T> tensor) where T : struct;
        /// <summary>Part `Rank` (along dimension 0) of the reduction.</summary>
        Tensor<T> ReduceScatter<T>(Tensor<T> tensor, ReduceOp operation) where T : struct;
        void Barrier();
    }

    public interface IAsyncCommunicationBackend : ICommunicationBackend
    {
        ICommunicationHandle BroadcastAsync<T>(Tensor<T> tensor, int rootRank) where T : struct;
        ICommunicationHandle AllReduceAsync<T>(Tensor<T> tensor, ReduceOp operation) where T : struct;
        ICommunicationHandle BarrierAsync();
        ICommunicationHandle ReduceAsync<T>(Tensor<T> tensor, ReduceOp operation, int rootRank) where T : struct;
        ICommunicationHandle AllGatherAsync<T>(Tensor<T> tensor) where T : struct;
        ICommunicationHandle ReduceScatterAsync<T>(Tensor<T> tensor, ReduceOp operation) where T : struct;
    }

    public interface IPointToPointCommunication
    {
        void Send<T>(Tensor<T> tensor, int destinationRank, int tag = 0) where T : struct;
        /// <summary>A message of any length: probed, then received into a new 1-D tensor.</summary>
        Tensor<T> Receive<T>(int sourceRank, int tag = 0) where T : struct;
        /// <summary>Into a new tensor shaped as template (a longer message fails with MLC_ERR_TRUNCATE).</summary>
        Tensor<T> Receive<T>(int sourceRank, Tensor<T> template, int tag = 0) where T : struct;
        ICommunicationHandle SendAsync<T>(Tensor<T> tensor, int destinationRank, int tag = 0) where T : struct;
        ICommunicationHandle ReceiveAsync<T>(int sourceRank, int tag = 0) where T : struct;
        ICommunicationHandle ReceiveAsync<T>(int sourceRank, Tensor<T> template, int tag = 0) where T : struct;
        /// <summary>A matching message if one has arrived (does not wait), else null.</summary>
        MessageInfo? Probe(int sourceRank, int tag = 0);
    }

    public interface ICommunicationBackendFactory
    {
        int Priority { get; }
        bool IsAvailable();
        ICommunicationBackend Create(CommunicationConfig config);
    }

    /// <summary>
    /// A backend over any mlcomm backend ("shm", "threads", "mpi", "nccl",
    /// "rccl"); MPIBackend, NCCLBackend and RCCLBackend are its named forms.
    /// </summary>
    public class MlcommBackend : IAsyncCommunicationBackend, IPointToPointCommunication
    {
        private readonly MlcommCommunicator _comm;
        private readonly CommunicationConfig _config;
        private readonly DeviceType _device;
        private readonly string _name;
        private readonly bool _owns;
        private bool _disposed;

        /// <summary>The backend interfaces over an existing communicator (not disposed with the backend).</summary>
        public MlcommBackend(ICommunicator communicator, CommunicationConfig config = null)
        {
            _comm = communicator as MlcommCommunicator;
            if (_comm == null) throw new ArgumentException("a communicator of this binding (CommunicatorFactory.Create) is needed");
            _config = config ?? new CommunicationConfig();
            _device = DeviceType.CPU;
            _name = _comm.BackendName;
            _owns = false;
        }

        public MlcommBackend(string backend, CommunicationConfig config, DeviceType device = DeviceType.CPU)
            : this(backend, config, device, null) { }

        internal MlcommBackend(string backend, CommunicationConfig config, DeviceType device, Dictionary<string, object> extra)
        {
            if (backend == null) throw new ArgumentNullException("backend");
            _config = config ?? throw new ArgumentNullException("config");
            var opts = config.ToOptions();
            if (extra != null) foreach (var kv in extra) opts[kv.Key] = kv.Value;
            _comm = (MlcommCommunicator)CommunicatorFactory.Create(backend, opts);
            _device = device;
            _name = backend;
            _owns = true;
        }

        public int Rank { get { return _comm.Rank; } }
        public int WorldSize { get { return _comm.WorldSize; } }
        public virtual string BackendName { get { return _name; } }
        public DeviceType Device { get { return _device; } }
        public bool IsInitialized { get { return !_disposed; } }
        public CommunicationConfig Config { get { return _config; } }
        /// <summary>The same communicator as an ICommunicator (Task-based operations).</summary>
        public ICommunicator Communicator { get { return _comm; } }
        internal CommEngine Engine { get { return _comm.Engine; } }

        /// <summary>Checks a tensor may be used here (device backends require device memory).</summary>
        protected virtual void CheckTensor(Tensor tensor, string argument)
        {
            if (tensor == null) throw new ArgumentNullException(argument);
        }

        private static Tensor<T> As<T>(Tensor t) where T : struct
        {
            var r = t as Tensor<T>;
            if (r != null) return r;
            return new Tensor<T>(t.Storage, t.DType, t.Shape.ToArray());
        }

        private static Tensor<T> Get<T>(Task<Tensor> t) where T : struct { return As<T>(CommEngine.Wait(t)); }
        private static ICommunicationHandle H(Task t) { return new AsyncCommunicationHandle(t); }

        public void Broadcast<T>(Tensor<T> tensor, int rootRank) where T : struct { CommEngine.Wait(BroadcastTask(tensor, rootRank)); }
        public Tensor<T> Reduce<T>(Tensor<T> tensor, ReduceOp operation, int rootRank) where T : struct { return Get<T>(ReduceTask(tensor, operation, rootRank)); }
        public Tensor<T> AllReduce<T>(Tensor<T> tensor, ReduceOp operation) where T : struct { return Get<T>(AllReduceTask(tensor, operation)); }
        public Tensor<T> AllGather<T>(Tensor<T> tensor) where T : struct { return Get<T>(AllGatherTask(tensor)); }
        public Tensor<T> ReduceScatter<T>(Tensor<T> tensor, ReduceOp operation) where T : struct { return Get<T>(ReduceScatterTask(tensor, operation)); }
        public void Barrier() { CommEngine.Wait(Ops.Barrier(Engine)); }

        public ICommunicationHandle BroadcastAsync<T>(Tensor<T> tensor, int rootRank) where T : struct { return H(BroadcastTask(tensor, rootRank)); }
        public ICommunicationHandle AllReduceAsync<T>(Tensor<T> tensor, ReduceOp operation) where T : struct { return H(AllReduceTask(tensor, operation)); }
        public ICommunicationHandle BarrierAsync() { return H(Ops.Barrier(Engine)); }
        public ICommunicationHandle ReduceAsync<T>(Tensor<T> tensor, ReduceOp operation, int rootRank) where T : struct { return H(ReduceTask(tensor, operation, rootRank)); }
        public ICommunicationHandle AllGatherAsync<T>(Tensor<T> tensor) where T : struct { return H(AllGatherTask(tensor)); }
        public ICommunicationHandle ReduceScatterAsync<T>(Tensor<T> tensor, ReduceOp operation) where T : struct { return H(ReduceScatterTask(tensor, operation)); }

        private Task<Tensor> BroadcastTask(Tensor tensor, int root) { CheckTensor(tensor, "tensor"); return Ops.Broadcast(Engine, tensor, root); }
        private Task<Tensor> ReduceTask(Tensor tensor, ReduceOp op, int root) { CheckTensor(tensor, "tensor"); return Ops.Reduce(Engine, tensor, op, root); }
        private Task<Tensor> AllReduceTask(Tensor tensor, ReduceOp op) { CheckTensor(tensor, "tensor"); return Ops.AllReduce(Engine, tensor, null, op); }
        private Task<Tensor> AllGatherTask(Tensor tensor) { CheckTensor(tensor, "tensor"); return Ops.AllGather(Engine, tensor, null, 0); }
        private Task<Tensor> ReduceScatterTask(Tensor tensor, ReduceOp op) { CheckTensor(tensor, "tensor"); return Ops.ReduceScatter(Engine, tensor, null, op, 0); }

        public void Send<T>(Tensor<T> tensor, int destinationRank, int tag = 0) where T : struct { CommEngine.Wait(SendTask(tensor, destinationRank, tag)); }
        public Tensor<T> Receive<T>(int sourceRank, int tag = 0) where T : struct { return Get<T>(ReceiveTask<T>(sourceRank, tag)); }
        public Tensor<T> Receive<T>(int sourceRank, Tensor<T> template, int tag = 0) where T : struct { return Get<T>(ReceiveTask(sourceRank, template, tag)); }
        public ICommunicationHandle SendAsync<T>(Tensor<T> tensor, int destinationRank, int tag = 0) where T : struct { return H(SendTask(tensor, destinationRank, tag)); }
        public ICommunicationHandle ReceiveAsync<T>(int sourceRank, int tag = 0) where T : struct { return H(ReceiveTask<T>(sourceRank, tag)); }
        public ICommunicationHandle ReceiveAsync<T>(int sourceRank, Tensor<T> template, int tag = 0) where T : struct { return H(ReceiveTask(sourceRank, template, tag)); }
        public MessageInfo? Probe(int sourceRank, int tag = 0) { return CommEngine.Wait(Ops.Probe(Engine, sourceRank, tag, false)); }
        /// <summary>Wait (bounded by the timeout) until a matching message has arrived.</summary>
        public MessageInfo WaitProbe(int sourceRank, int tag = 0) { return CommEngine.Wait(Ops.Probe(Engine, sourceRank, tag, true)).Value; }

        private Task<bool> SendTask(Tensor tensor, int dest, int tag) { CheckTensor(tensor, "tensor"); return Ops.Send(Engine, tensor, dest, tag); }
        private Task<Tensor> ReceiveTask<T>(int source, int tag) where T : struct
        {
            if (_device != DeviceType.CPU) throw new NotSupportedException(_name + ": Receive without a template allocates host memory; pass a device template");
            return Ops.Receive<T>(Engine, source, tag);
        }
        private Task<Tensor> ReceiveTask(int source, Tensor template, int tag)
        {
            CheckTensor(template, "template");
            return Ops.ReceiveInto(Engine, template.NewLike(template.Shape.ToArray()), source, tag);
        }

        public void Dispose()
        {
            if (_disposed) return;
            _disposed = true;
            if (_owns) _comm.Dispose();
        }
    }

    /// <summary>MPI settings, applied as mlcomm's environment before the backend is created.</summary>
    public class MPIConfig
    {
        /// <summary>Hand device buffers to a CUDA-aware MPI as they are (MLC_MPI_CUDA_AWARE=1), else stage them through pinned host memory (0).</summary>
        public bool UseCudaAwareMPI { get; set; } = true;
        /// <summary>
        /// MPI thread level: 0 single, 1 funneled, 2 serialized, 3 multiple (the default).
        /// Every communicator has its own completion thread that makes its MPI calls,
        /// so with more than one communicator (a split, a second backend) MPI is
        /// called from several threads at once, which only multiple allows; a lower
        /// level is for a program with one communicator.
        /// </summary>
        public int ThreadLevel { get; set; } = 3;
        /// <summary>Per-collective statistics (mlcomm profile "stats").</summary>
        public bool EnableProfiling { get; set; } = false;
        /// <summary>Chunk size in bytes of staged (device memory) transfers (MLC_STAGE_CHUNK; the same on every rank).</summary>
        public int BufferSize { get; set; } = 65536;

        /// <summary>Set the environment variables these settings map to (before creating the backend).</summary>
        public void Apply()
        {
            if (ThreadLevel < 0 || ThreadLevel > 3) throw new ArgumentException("ThreadLevel " + ThreadLevel + " is not 0..3");
            if (BufferSize < 64) throw new ArgumentException("BufferSize " + BufferSize + " is below 64 bytes");
            Environment.SetEnvironmentVariable("MLC_MPI_CUDA_AWARE", UseCudaAwareMPI ? "auto" : "0");
            Environment.SetEnvironmentVariable("MLC_MPI_THREAD_LEVEL", ThreadLevel.ToString(CultureInfo.InvariantCulture));
            Environment.SetEnvironmentVariable("MLC_STAGE_CHUNK", BufferSize.ToString(CultureInfo.InvariantCulture));
            if (EnableProfiling) Environment.SetEnvironmentVariable("MLC_PROFILE", "stats");
        }
    }

    /// <summary>CPU and GPU communication over MPI (mlcomm's `mpi` backend; rank and size from mpirun).</summary>
    public class MPIBackend : MlcommBackend
    {
        public MPIBackend(CommunicationConfig config) : base("mpi", config, DeviceType.CPU, null) { }
        public MPIBackend(CommunicationConfig config, MPIConfig mpiConfig)
            : base("mpi", config, DeviceType.CPU, ApplyFirst(mpiConfig)) { }
        private static Dictionary<string, object> ApplyFirst(MPIConfig c)
        {
            if (c == null) throw new ArgumentNullException("mpiConfig");
            c.Apply();
            return new Dictionary<string, object> { { "mpi_thread_level", c.ThreadLevel.ToString(CultureInfo.InvariantCulture) } };
        }
        public override string BackendName { get { return "MPI"; } }
    }

    /// <summary>RCCL settings, applied as RCCL's environment (it reads NCCL_* variables).</summary>
    public class RCCLConfig
    {
        public bool UseRingAllReduce { get; set; } = true;
        public bool UseTreeAllReduce { get; set; } = false;
        public int NumChannels { get; set; } = 1;
        public bool EnableDebug { get; set; } = false;
        public int BufferSize { get; set; } = 4194304;

        public static void SetEnvironmentVariable(string key, string value) { Environment.SetEnvironmentVariable(key, value); }

        /// <summary>Set NCCL_ALGO, NCCL_DEBUG, NCCL_BUFFSIZE and the channel counts (before creating the backend).</summary>
        public void Apply()
        {
            var algos = new List<string>();
            if (UseRingAllReduce) algos.Add("Ring");
            if (UseTreeAllReduce) algos.Add("Tree");
            if (algos.Count == 0) throw new ArgumentException("RCCLConfig: neither ring nor tree all-reduce is enabled");
            SetEnvironmentVariable("NCCL_ALGO", string.Join(",", algos));
            SetEnvironmentVariable("NCCL_DEBUG", EnableDebug ? "INFO" : "WARN");
            SetEnvironmentVariable("NCCL_BUFFSIZE", BufferSize.ToString(CultureInfo.InvariantCulture));
            if (NumChannels > 1)
            {
                SetEnvironmentVariable("NCCL_MIN_NCHANNELS", NumChannels.ToString(CultureInfo.InvariantCulture));
                SetEnvironmentVariable("NCCL_MAX_NCHANNELS", NumChannels.ToString(CultureInfo.InvariantCulture));
            }
        }
    }

    /// <summary>NCCL settings: the same variables as RCCL's.</summary>
    public class NCCLConfig : RCCLConfig { }

    /// <summary>AMD GPUs over RCCL (mlcomm's `rccl` backend): tensors must be in ROCm device memory.</summary>
    public class RCCLBackend : MlcommBackend
    {
        public RCCLBackend(int rank, int worldSize, CommunicationConfig config)
            : base("rccl", config, DeviceType.ROCm, RankOptions(rank, worldSize)) { }
        internal static Dictionary<string, object> RankOptions(int rank, int worldSize)
        {
            if (worldSize < 1 || rank < 0 || rank >= worldSize) throw new ArgumentException("rank " + rank + " of world size " + worldSize);
            return new Dictionary<string, object> { { "rank", rank }, { "world_size", worldSize } };
        }
        public override string BackendName { get { return "RCCL"; } }
        protected override void CheckTensor(Tensor tensor, string argument)
        {
            base.CheckTensor(tensor, argument);
            if (tensor.Device != DeviceType.ROCm) throw new ArgumentException("Tensor must be on GPU (ROCm) for RCCL operations, it is on " + tensor.Device, argument);
        }
    }

    /// <summary>NVIDIA GPUs over NCCL (mlcomm's `nccl` backend): tensors must be in CUDA device memory.</summary>
    public class NCCLBackend : MlcommBackend
    {
        public NCCLBackend(int rank, int worldSize, CommunicationConfig config)
            : base("nccl", config, DeviceType.CUDA, RCCLBackend.RankOptions(rank, worldSize)) { }
        public override string BackendName { get { return "NCCL"; } }
        protected override void CheckTensor(Tensor tensor, string argument)
        {
            base.CheckTensor(tensor, argument);
            if (tensor.Device != DeviceType.CUDA) throw new ArgumentException("Tensor must be on GPU (CUDA) for NCCL operations, it is on " + tensor.Device, argument);
        }
    }

    /// <summary>Availability as libmlcomm decides it (library or module loadable), with the reason when not.</summary>
    public static class BackendAvailability
    {
        /// <summary>null when `backend` can run here, else why not.</summary>
        public static string WhyUnavailable(string backend)
        {
            NativeLoader.Ensure();
            return Check(backend);
        }

        private static string Check(string backend)
        {
            int st = Mlc.mlc_backend_check(backend);
            return st == Mlc.Success ? null : Mlc.LastError();
        }

        /// <summary>Rank and size from the launcher's variables (RANK/WORLD_SIZE, Open MPI, MPICH, Slurm, mlcomm-run).</summary>
        public static int EnvInt(int dflt, params string[] names)
        {
            foreach (var n in names)
            {
                int v;
                if (int.TryParse(Environment.GetEnvironmentVariable(n), out v)) return v;
            }
            return dflt;
        }
        internal static int Rank() { return EnvInt(0, "MLC_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"); }
        internal static int WorldSize() { return EnvInt(1, "MLC_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"); }

        /// <summary>The available factory of highest priority creates the backend.</summary>
        public static ICommunicationBackend CreateBest(CommunicationConfig config, params ICommunicationBackendFactory[] factories)
        {
            var f = factories.Where(x => x.IsAvailable()).OrderByDescending(x => x.Priority).FirstOrDefault();
            if (f == null) throw new CommunicationException("no backend available among " + string.Join(", ", factories.Select(x => x.GetType().Name)));
            return f.Create(config);
        }
    }

    public class MPIBackendFactory : ICommunicationBackendFactory
    {
        private static readonly Lazy<string> _why = new Lazy<string>(() => BackendAvailability.WhyUnavailable("mpi"));
        public int Priority { get { return 50; } }
        public bool IsAvailable() { return _why.Value == null; }
        public string UnavailableReason { get { return _why.Value; } }
        public ICommunicationBackend Create(CommunicationConfig config)
        {
            if (!IsAvailable()) throw new CommunicationException("MPI is not available on this system: " + _why.Value);
            return new MPIBackend(config);
        }
    }

    public class RCCLBackendFactory : ICommunicationBackendFactory
    {
        private static readonly Lazy<string> _why = new Lazy<string>(() => BackendAvailability.WhyUnavailable("rccl"));
        public int Priority { get { return 90; } }
        public bool IsAvailable() { return _why.Value == null; }
        public string UnavailableReason { get { return _why.Value; } }
        public ICommunicationBackend Create(CommunicationConfig config)
        {
            if (!IsAvailable()) throw new CommunicationException("RCCL is not available on this system: " + _why.Value);
            return new RCCLBackend(BackendAvailability.Rank(), BackendAvailability.WorldSize(), config);
        }
    }

    public class NCCLBackendFactory : ICommunicationBackendFactory
    {
        private static readonly Lazy<string> _why = new Lazy<string>(() => BackendAvailability.WhyUnavailable("nccl"));
        public int Priority { get { return 100; } }
        public bool IsAvailable() { return _why.Value == null; }
        public string UnavailableReason { get { return _why.Value; } }
        public ICommunicationBackend Create(CommunicationConfig config)
        {
            if (!IsAvailable()) throw new CommunicationException("NCCL is not available on this system: " + _why.Value);
            return new NCCLBackend(BackendAvailability.Rank(), BackendAvailability.WorldSize(), config);
        }
    }
}
