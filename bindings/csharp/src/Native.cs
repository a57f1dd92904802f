// SPDX-License-Identifier: BSD-3-Clause
// P/Invoke declarations for libmlcomm's public C API (include/*.h). Every
// pointer-sized C type is IntPtr/UIntPtr; the binding is for 64-bit Linux,
// where size_t is 8 bytes (checked once in Native's static constructor).
using System;
using System.Runtime.InteropServices;

namespace MLFramework.Communication.Native
{
    /// <summary>mlc_tensor_t: a dense row-major tensor descriptor (does not own data).</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal unsafe struct MlcTensor
    {
        public IntPtr Data;
        public int DType;
        public int NDim;
        public fixed ulong Shape[8];
        public int Device;
    }

    /// <summary>mlc_msg_status_t.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MlcMsgStatus
    {
        public int Source;
        public int Tag;
        public UIntPtr Bytes;
    }

    /// <summary>mlc_option_t.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MlcOption
    {
        public IntPtr Key;
        public IntPtr Value;
    }

    /// <summary>mlc_profile_stat_t.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MlcProfileStat
    {
        public int Coll;
        public ulong Count;
        public ulong Bytes;
        public double TimeS;
        public double MinGbps;
        public double AvgGbps;
        public double MaxGbps;
    }

    /// <summary>mlc_box_t.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal unsafe struct MlcBox
    {
        public int NDim;
        public fixed long Start[8];
        public fixed long Shape[8];
    }

    /// <summary>mlc_view_t.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MlcView
    {
        public IntPtr Data;
        public MlcBox Parent;
        public MlcBox Region;
    }

    /// <summary>mlc_exchange_config_t.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal unsafe struct MlcExchangeConfig
    {
        public UIntPtr Size;
        public uint Magic;
        public uint Version;
        public int NDim;
        public int DType;
        public uint Flags;
        public MlcBox Domain;
        public fixed int Periodic[8];
    }

    /// <summary>mlc_exchange_info_t.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MlcExchangeInfo
    {
        public int SendPeers;
        public int RecvPeers;
        public UIntPtr SendBytes;
        public UIntPtr RecvBytes;
        public UIntPtr SendSegments;
        public UIntPtr RecvSegments;
        public UIntPtr LocalCopies;
        public UIntPtr LocalBytes;
        public ulong UnprovidedCells;
        public ulong Builds;
        public ulong CacheHits;
        public ulong Runs;
        public ulong LayoutHash;
        public IntPtr Executor;
    }

    /// <summary>mlc_pinned_info_t (public pinned-pool statistics).</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MlcPinnedInfo
    {
        public UIntPtr Limit;
        public UIntPtr BytesPinned;
        public UIntPtr BytesInUse;
        public UIntPtr BytesCached;
        public ulong Hits;
        public ulong Misses;
        public ulong Evictions;
        public IntPtr Mode;
    }

    /// <summary>mlc_gpudirect_info_t (public GPU-direct capabilities).</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MlcGpuDirectInfo
    {
        public int Rdma;
        public IntPtr RdmaEvidence;
        public int PeerAccess;
        public IntPtr PeerEvidence;
        public int CudaAwareMpi;
        public IntPtr MpiEvidence;
        public int Ipc;
        public IntPtr IpcEvidence;
    }

    /// <summary>mlc_config_t (mlcomm.h): every field "unset" until given.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MlcConfig
    {
        public UIntPtr Size;
        public uint Magic;
        public uint Version;
        public IntPtr Backend;
        public int Rank;
        public int WorldSize;
        public int LocalRank;
        public int LocalSize;
        public IntPtr JobId;
        public double TimeoutS;
        public int LogLevel;
        public IntPtr LogFile;
        public IntPtr Profile;
        public int Memory;
        public int MpiThreadLevel;
        public int Cma;

        /// <summary>MLC_CONFIG_INIT.</summary>
        internal static MlcConfig Init()
        {
            const int unset = -1;
            return new MlcConfig
            {
                Size = (UIntPtr)(ulong)Marshal.SizeOf(typeof(MlcConfig)), Magic = 0x4d4c4331u, Version = 1u,
                Rank = unset, WorldSize = unset, LocalRank = unset, LocalSize = unset, TimeoutS = -1.0,
                LogLevel = unset, Memory = unset, MpiThreadLevel = unset, Cma = unset,
            };
        }
    }

    /// <summary>mlc_store_t's set callback.</summary>
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate int MlcStoreSet(IntPtr ctx, IntPtr key, IntPtr value, UIntPtr len);
    /// <summary>mlc_store_t's get callback (len: size_t *).</summary>
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate int MlcStoreGet(IntPtr ctx, IntPtr key, IntPtr buf, UIntPtr cap, IntPtr len, double timeoutS);

    /// <summary>mlc_store_t: the callbacks as function pointers.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MlcStore
    {
        public IntPtr Ctx;
        public IntPtr Set;
        public IntPtr Get;
    }

    /// <summary>Loads the library MLCOMM_LIBRARY names, when set, before the first P/Invoke.</summary>
    internal static class NativeLoader
    {
        [DllImport("libdl.so.2", EntryPoint = "dlopen")]
        private static extern IntPtr dlopen(string path, int flags);
        [DllImport("libdl.so.2", EntryPoint = "dlerror")]
        private static extern IntPtr dlerror();
        [DllImport("libc.so.6", EntryPoint = "realpath")]
        private static extern IntPtr realpath(string path, IntPtr resolved);
        [DllImport("libc.so.6", EntryPoint = "free")]
        private static extern void free(IntPtr p);

        /// <summary>The file a path names, links resolved; null if there is none.</summary>
        private static string RealPath(string path)
        {
            IntPtr p = realpath(path, IntPtr.Zero);
            if (p == IntPtr.Zero) return null;
            string s = Marshal.PtrToStringAnsi(p);
            free(p);
            return s;
        }

        /// <summary>
        /// MLCOMM_LIBRARY names the library to use: it is loaded (RTLD_GLOBAL)
        /// before any call, so the DllImport of "libmlcomm.so.0" (the dllmap in
        /// MLFramework.Communication.dll.config) resolves to it by its soname.
        /// Without it Mono looks next to the assembly, then on the loader path.
        /// Mono looks next to the assembly first whatever is loaded: a
        /// libmlcomm.so.0 there that is another file would be loaded beside
        /// MLCOMM_LIBRARY's and take the calls, so that is refused.
        /// </summary>
        static NativeLoader()
        {
            if (IntPtr.Size != 8)
                throw new PlatformNotSupportedException("MLFramework.Communication needs a 64-bit process (size_t is marshalled as 8 bytes)");
            string path = Environment.GetEnvironmentVariable("MLCOMM_LIBRARY");
            if (!string.IsNullOrEmpty(path))
            {
                const int RTLD_NOW = 2, RTLD_GLOBAL = 0x100;
                if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) == IntPtr.Zero)
                    throw new DllNotFoundException("MLCOMM_LIBRARY=" + path + ": " + Marshal.PtrToStringAnsi(dlerror()));
                string dir = System.IO.Path.GetDirectoryName(typeof(NativeLoader).Assembly.Location);
                string beside = string.IsNullOrEmpty(dir) ? null : RealPath(System.IO.Path.Combine(dir, "libmlcomm.so.0"));
                string wanted = RealPath(path);
                // A bare name (no '/') is found by the loader, not here: refused beside a library too.
                if (beside != null && (wanted == null || !path.Contains("/") || beside != wanted))
                    throw new DllNotFoundException("MLCOMM_LIBRARY=" + path + " (" + (wanted ?? "found by the loader") + "), but " + dir +
                        "/libmlcomm.so.0 (" + beside + ") lies next to the assembly, and Mono loads that one first: " +
                        "both would be loaded and the calls would go to it. Remove it, or run a copy of the " +
                        "assembly from a folder without it");
            }
        }

        /// <summary>
        /// Runs the preload. Called by every public entry point before it calls
        /// a method with a P/Invoke (Mono resolves a P/Invoke when it compiles
        /// the method that calls it, so the entry point itself holds none).
        /// </summary>
        internal static void Ensure() { }

    }

    internal static class Mlc
    {
        internal const string Lib = "mlcomm";
        internal const int MaxDims = 8;
        internal const int Success = 0;
        internal const int ErrInvalidArg = -1;
        internal const int ErrUnavailable = -4;
        internal const int ErrTimeout = -5;
        internal const int ErrTruncate = -8;
        internal const int ErrConfig = -9;
        internal const int StoreOk = 0;
        internal const int StoreTimeout = 1;
        /// <summary>A store callback's failure (any value but StoreOk and StoreTimeout).</summary>
        internal const int StoreFailed = 2;
        internal const int DeviceHost = -1;
        internal const int AnySource = -1;
        internal const int AnyTag = -1;
        internal const int Undefined = -32766;

        internal static string Str(IntPtr p) { return p == IntPtr.Zero ? null : Marshal.PtrToStringAnsi(p); }
        internal static string LastError() { return Str(mlc_last_error()); }
        internal static string StatusName(int st) { return Str(mlc_status_name(st)); }

        [DllImport(Lib)] internal static extern IntPtr mlc_version();
        [DllImport(Lib)] internal static extern IntPtr mlc_status_string(int st);
        [DllImport(Lib)] internal static extern IntPtr mlc_status_name(int st);
        [DllImport(Lib)] internal static extern IntPtr mlc_last_error();
        [DllImport(Lib)] internal static extern UIntPtr mlc_dtype_size(int dtype);

        // communicators
        [DllImport(Lib)] internal static extern int mlc_get_unique_id(IntPtr id);
        [DllImport(Lib)] internal static extern int mlc_comm_create_from(string backend, MlcOption[] options, UIntPtr n, IntPtr uid, int capacity, IntPtr[] comms, out int ncomms);
        [DllImport(Lib)] internal static extern int mlc_comm_rank(IntPtr comm);
        [DllImport(Lib)] internal static extern int mlc_comm_size(IntPtr comm);
        [DllImport(Lib)] internal static extern IntPtr mlc_comm_backend(IntPtr comm);
        [DllImport(Lib)] internal static extern double mlc_comm_timeout(IntPtr comm);
        [DllImport(Lib)] internal static extern int mlc_comm_status(IntPtr comm);
        [DllImport(Lib)] internal static extern int mlc_comm_split(IntPtr comm, int color, int key, out IntPtr outComm);
        [DllImport(Lib)] internal static extern int mlc_comm_free(IntPtr comm);
        [DllImport(Lib)] internal static extern int mlc_comm_abort(IntPtr comm);
        [DllImport(Lib)] internal static extern int mlc_comm_set_algo(IntPtr comm, int coll, string algo);
        [DllImport(Lib)] internal static extern int mlc_comm_get_algo(IntPtr comm, int coll, UIntPtr bytes, out IntPtr name);
        [DllImport(Lib)] internal static extern int mlc_comm_tag_max(IntPtr comm);
        [DllImport(Lib)] internal static extern int mlc_comm_memory(IntPtr comm);
        [DllImport(Lib)] internal static extern int mlc_comm_device(IntPtr comm);
        [DllImport(Lib)] internal static extern int mlc_comm_init_store(ref MlcStore store, int nranks, int rank, ref MlcConfig cfg, out IntPtr comm);

        // groups
        [DllImport(Lib)] internal static extern int mlc_group_start();
        [DllImport(Lib)] internal static extern int mlc_group_end();
        [DllImport(Lib)] internal static extern int mlc_profile_stats(IntPtr comm, [Out] MlcProfileStat[] stats, ref UIntPtr n);

        // requests
        [DllImport(Lib)] internal static extern int mlc_request_test(ref IntPtr req, out int done);
        [DllImport(Lib)] internal static extern int mlc_request_wait(ref IntPtr req);

        // buffer collectives and point-to-point
        [DllImport(Lib)] internal static extern int mlc_reduce(IntPtr send, IntPtr recv, UIntPtr count, int dtype, int op, int root, IntPtr comm, out IntPtr req);
        [DllImport(Lib)] internal static extern int mlc_allgather(IntPtr send, IntPtr recv, UIntPtr count, int dtype, IntPtr comm, out IntPtr req);
        [DllImport(Lib)] internal static extern int mlc_reduce_scatter(IntPtr send, IntPtr recv, UIntPtr count, int dtype, int op, IntPtr comm, out IntPtr req);
        [DllImport(Lib)] internal static extern int mlc_send(IntPtr buf, UIntPtr count, int dtype, int peer, int tag, IntPtr comm, out IntPtr req);
        [DllImport(Lib)] internal static extern int mlc_recv(IntPtr buf, UIntPtr count, int dtype, int peer, int tag, IntPtr comm, IntPtr status, out IntPtr req);
        [DllImport(Lib)] internal static extern int mlc_probe(int source, int tag, IntPtr comm, out MlcMsgStatus status);
        [DllImport(Lib)] internal static extern int mlc_iprobe(int source, int tag, IntPtr comm, out int flag, out MlcMsgStatus status);

        // tensor layer
        [DllImport(Lib)] internal static extern int mlc_tensor_split(UIntPtr n, int size, int rank, out UIntPtr offset, out UIntPtr length);
        [DllImport(Lib)] internal static extern int mlc_tensor_request_test(ref IntPtr req, out int done);
        [DllImport(Lib)] internal static extern int mlc_tensor_allgather(IntPtr shard, IntPtr outT, int dim, IntPtr comm, out IntPtr req);
        [DllImport(Lib)] internal static extern int mlc_tensor_reduce_scatter(IntPtr inT, IntPtr outT, int dim, int op, IntPtr comm, out IntPtr req);
        [DllImport(Lib)] internal static extern int mlc_tensor_allreduce(IntPtr inT, IntPtr outT, int op, IntPtr comm, out IntPtr req);
        [DllImport(Lib)] internal static extern int mlc_tensor_broadcast(IntPtr t, int root, IntPtr comm, out IntPtr req);
        [DllImport(Lib)] internal static extern int mlc_tensor_barrier(IntPtr comm, out IntPtr req);

        // exchange planner
        [DllImport(Lib)] internal static extern int mlc_exchange_create(IntPtr comm, ref MlcExchangeConfig cfg, out IntPtr ex);
        [DllImport(Lib)] internal static extern int mlc_exchange_provide(IntPtr ex, ref MlcView view, out int id);
        [DllImport(Lib)] internal static extern int mlc_exchange_need(IntPtr ex, ref MlcView view, out int id);
        [DllImport(Lib)] internal static extern int mlc_exchange_set_data(IntPtr ex, int side, int id, IntPtr data);
        [DllImport(Lib)] internal static extern int mlc_exchange_clear(IntPtr ex);
        [DllImport(Lib)] internal static extern int mlc_exchange_set_topology_version(IntPtr ex, ulong version);
        [DllImport(Lib)] internal static extern int mlc_exchange_build(IntPtr ex);
        [DllImport(Lib)] internal static extern int mlc_exchange_set_executor(IntPtr ex, string name);
        [DllImport(Lib)] internal static extern int mlc_exchange_start(IntPtr ex);
        [DllImport(Lib)] internal static extern int mlc_exchange_finish(IntPtr ex);
        [DllImport(Lib)] internal static extern int mlc_exchange_info(IntPtr ex, out MlcExchangeInfo info);
        [DllImport(Lib)] internal static extern int mlc_exchange_free(IntPtr ex);

        // host memory and GPU capabilities (public API added for bindings)
        [DllImport(Lib)] internal static extern int mlc_mem_alloc(UIntPtr bytes, out IntPtr ptr);
        [DllImport(Lib)] internal static extern int mlc_mem_free(IntPtr ptr);
        [DllImport(Lib)] internal static extern int mlc_pinned_pool_open(UIntPtr limit, out IntPtr pool);
        [DllImport(Lib)] internal static extern int mlc_pinned_pool_close(IntPtr pool);
        [DllImport(Lib)] internal static extern int mlc_pinned_pool_alloc(IntPtr pool, UIntPtr bytes, out IntPtr ptr);
        [DllImport(Lib)] internal static extern int mlc_pinned_pool_release(IntPtr pool, IntPtr ptr);
        [DllImport(Lib)] internal static extern int mlc_pinned_pool_pin(IntPtr pool, IntPtr ptr, UIntPtr bytes);
        [DllImport(Lib)] internal static extern int mlc_pinned_pool_unpin(IntPtr pool, IntPtr ptr);
        [DllImport(Lib)] internal static extern int mlc_pinned_pool_info(IntPtr pool, out MlcPinnedInfo info);
        [DllImport(Lib)] internal static extern int mlc_gpudirect_query(out MlcGpuDirectInfo info);
        [DllImport(Lib)] internal static extern int mlc_backend_check(string name);
    }
}
