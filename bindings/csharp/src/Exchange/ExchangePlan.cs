// SPDX-License-Identifier: BSD-3-Clause
// The exchange planner (distributed arrays: halo / ghost-zone exchange) over
// mlcomm's mlc_exchange_*: ranks publish the boxes they provide and the
// boxes they need; Build (collective) plans who sends what to whom, cached
// while no rank's layout changes; Run, or Start ... Finish (split phase),
// moves the data. Views are over managed arrays (pinned while registered)
// or native memory.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using MLFramework.Communication.Native;
using MLFramework.Distributed.Communication;

namespace MLFramework.Communication.Exchange
{
    /// <summary>A box of the global index space: start[d] &lt;= i[d] &lt; start[d] + shape[d].</summary>
    public sealed class Box
    {
        public long[] Start { get; private set; }
        public long[] Shape { get; private set; }
        public Box(long[] start, long[] shape)
        {
            if (start == null || shape == null) throw new ArgumentNullException(start == null ? "start" : "shape");
            if (start.Length != shape.Length) throw new ArgumentException("start has " + start.Length + " dimensions, shape " + shape.Length);
            if (start.Length < 1 || start.Length > 8) throw new ArgumentException("a box has 1..8 dimensions, got " + start.Length);
            Start = (long[])start.Clone(); Shape = (long[])shape.Clone();
        }
        public int NDim { get { return Start.Length; } }
        public long Cells { get { long n = 1; foreach (long s in Shape) n *= s; return n; } }
        internal unsafe MlcBox ToNative()
        {
            var b = new MlcBox { NDim = NDim };
            for (int d = 0; d < NDim; d++) { b.Start[d] = Start[d]; b.Shape[d] = Shape[d]; }
            return b;
        }
        internal static unsafe Box FromNative(MlcBox b)
        {
            var st = new long[b.NDim]; var sh = new long[b.NDim];
            for (int d = 0; d < b.NDim; d++) { st[d] = b.Start[d]; sh[d] = b.Shape[d]; }
            return new Box(st, sh);
        }
        /// <summary>`valid` grown by width[d] on both sides of every axis, minus valid: the halo boxes.</summary>
        public Box Grow(params long[] width)
        {
            var st = new long[NDim]; var sh = new long[NDim];
            for (int d = 0; d < NDim; d++) { st[d] = Start[d] - width[d]; sh[d] = Shape[d] + 2 * width[d]; }
            return new Box(st, sh);
        }
        public override string ToString() { return "box(start [" + string.Join(", ", Start) + "], shape [" + string.Join(", ", Shape) + "])"; }
    }

    /// <summary>What a built plan does on this rank per exchange.</summary>
    public sealed class ExchangeInfo
    {
        public int SendPeers, RecvPeers;
        public long SendBytes, RecvBytes, LocalCopies, LocalBytes;
        public long Builds, CacheHits, Runs;
        public string Executor;
    }

    public enum ExchangeSide { Provide = 0, Need = 1 }

    public sealed class ExchangePlan : IDisposable
    {
        private readonly CommunicatorBackend _comm;
        private IntPtr _ex;
        private readonly int _ndim;
        private readonly DType _dtype;
        private readonly List<ITensorStorage> _pinned = new List<ITensorStorage>();
        private bool _inFlight;

        /// <summary>
        /// An exchange over comm (collective). domain (optional unless an axis
        /// is periodic) bounds the provided regions; periodic[d] wraps axis d.
        /// allowUnprovided leaves needed cells nobody provides untouched
        /// instead of failing the build.
        /// </summary>
        public unsafe ExchangePlan(ICommunicator comm, int ndim, DType dtype, Box domain = null, bool[] periodic = null, bool allowUnprovided = false)
        {
            _comm = comm as CommunicatorBackend;
            if (_comm == null) throw new ArgumentException("the exchange needs a communicator of this binding");
            _ndim = ndim; _dtype = dtype;
            var cfg = new MlcExchangeConfig
            {
                Size = (UIntPtr)(ulong)sizeof(MlcExchangeConfig), Magic = 0x4d4c5831u, Version = 1u,
                NDim = ndim, DType = (int)dtype, Flags = allowUnprovided ? 1u : 0u,
            };
            if (domain != null) cfg.Domain = domain.ToNative();
            if (periodic != null)
                for (int d = 0; d < periodic.Length && d < 8; d++) cfg.Periodic[d] = periodic[d] ? 1 : 0;
            _ex = CommEngine.Wait(_comm.Engine.Call(c =>
            {
                IntPtr ex;
                var k = cfg;
                CommunicationException.Check(Mlc.mlc_exchange_create(c, ref k, out ex));
                return ex;
            }));
        }

        private T Do<T>(Func<IntPtr, T> f)
        {
            if (_ex == IntPtr.Zero) throw new ObjectDisposedException("ExchangePlan");
            IntPtr ex = _ex;
            return CommEngine.Wait(_comm.Engine.Call(c => f(ex)));
        }
        private void Check(Func<IntPtr, int> f) { Do(ex => { CommunicationException.Check(f(ex)); return true; }); }

        private int Add(ExchangeSide side, IntPtr data, Box parent, Box region)
        {
            if (parent == null || region == null) throw new ArgumentNullException(parent == null ? "parent" : "region");
            var v = new MlcView { Data = data, Parent = parent.ToNative(), Region = region.ToNative() };
            return Do(ex =>
            {
                int id;
                var view = v;
                CommunicationException.Check(side == ExchangeSide.Provide ? Mlc.mlc_exchange_provide(ex, ref view, out id) : Mlc.mlc_exchange_need(ex, ref view, out id));
                return id;
            });
        }

        private IntPtr Pin(Array data, Box parent)
        {
            if (data == null) throw new ArgumentNullException("data");
            if (Tensor.DTypeOf(data.GetType().GetElementType()) != _dtype && !(data is ushort[] && (_dtype == DType.Float16 || _dtype == DType.BFloat16)))
                throw new ArgumentException("array of " + data.GetType().GetElementType().Name + " for an exchange of " + _dtype);
            if (data.LongLength < parent.Cells)
                throw new ArgumentException("array of " + data.LongLength + " elements is smaller than its parent " + parent + " (" + parent.Cells + " cells)");
            var s = new ManagedStorage(data);
            IntPtr p = s.Acquire();
            lock (_pinned) _pinned.Add(s);
            return p;
        }

        /// <summary>Publish `region` of an array laid out as `parent` (C order); returns its id. The array stays pinned until Clear or Dispose.</summary>
        public int Provide(Array data, Box parent, Box region) { return Add(ExchangeSide.Provide, Pin(data, parent), parent, region); }
        /// <summary>Ask for `region`, written into an array laid out as `parent`.</summary>
        public int Need(Array data, Box parent, Box region) { return Add(ExchangeSide.Need, Pin(data, parent), parent, region); }
        public int Provide(IntPtr data, Box parent, Box region) { return Add(ExchangeSide.Provide, data, parent, region); }
        public int Need(IntPtr data, Box parent, Box region) { return Add(ExchangeSide.Need, data, parent, region); }

        /// <summary>Point a view at new native memory of the same layout (double buffering); no rebuild.</summary>
        public void SetData(ExchangeSide side, int id, IntPtr data) { Check(ex => Mlc.mlc_exchange_set_data(ex, (int)side, id, data)); }
        /// <summary>Say the layout changed (every rank bumps it together); the plan cache compares this instead of hashing boxes.</summary>
        public void SetTopologyVersion(ulong version) { Check(ex => Mlc.mlc_exchange_set_topology_version(ex, version)); }
        /// <summary>"auto", "p2p", and on the mpi backend "mpi_pack" or "mpi_subarray".</summary>
        public void SetExecutor(string name) { Check(ex => Mlc.mlc_exchange_set_executor(ex, name)); }

        /// <summary>Forget this rank's provides and needs (the built plan is kept for reuse).</summary>
        public void Clear()
        {
            Check(ex => Mlc.mlc_exchange_clear(ex));
            ReleasePins();
        }

        private void ReleasePins() { lock (_pinned) { foreach (var s in _pinned) s.Release(); _pinned.Clear(); } }

        /// <summary>Make (or reuse) the plan. Collective.</summary>
        public void Build() { Check(ex => Mlc.mlc_exchange_build(ex)); }
        /// <summary>One exchange: start and finish.</summary>
        public void Run() { Start(); Finish(); }
        /// <summary>Begin one exchange; compute on anything but the needed regions until Finish.</summary>
        public void Start() { Check(ex => Mlc.mlc_exchange_start(ex)); _inFlight = true; }
        /// <summary>Wait for the exchange begun by Start (bounded by the timeout) and unpack it.</summary>
        public void Finish() { _inFlight = false; Check(ex => Mlc.mlc_exchange_finish(ex)); }
        public bool InFlight { get { return _inFlight; } }
        public int NDim { get { return _ndim; } }
        public DType DType { get { return _dtype; } }

        public ExchangeInfo Info()
        {
            var i = Do(ex => { MlcExchangeInfo x; CommunicationException.Check(Mlc.mlc_exchange_info(ex, out x)); return x; });
            return new ExchangeInfo
            {
                SendPeers = i.SendPeers, RecvPeers = i.RecvPeers, SendBytes = (long)(ulong)i.SendBytes, RecvBytes = (long)(ulong)i.RecvBytes,
                LocalCopies = (long)(ulong)i.LocalCopies, LocalBytes = (long)(ulong)i.LocalBytes, Builds = (long)i.Builds,
                CacheHits = (long)i.CacheHits, Runs = (long)i.Runs, Executor = Mlc.Str(i.Executor),
            };
        }

        public void Dispose()
        {
            if (_ex == IntPtr.Zero) return;
            IntPtr ex = _ex;
            _ex = IntPtr.Zero;
            CommEngine.Wait(_comm.Engine.Call(c => Mlc.mlc_exchange_free(ex)));
            ReleasePins();
        }
    }
}
