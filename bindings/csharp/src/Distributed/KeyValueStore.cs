// SPDX-License-Identifier: BSD-3-Clause
// Bootstrap through the caller's key-value store (mlc_comm_init_store): the
// store's two methods become mlc_store_t's callbacks. The delegates live as
// long as the init call; no managed exception crosses into native code (a
// callback that throws returns a failure, and the exception is reported).
using System;
using System.Runtime.InteropServices;
using MLFramework.Communication;
using MLFramework.Communication.Native;

namespace MLFramework.Distributed.Communication
{
    /// <summary>
    /// A key-value store every rank reaches (as torch's TCPStore or Gloo's
    /// store). mlcomm calls it only during CommunicatorFactory.FromStore, from
    /// the calling thread, one call at a time per rank. Keys start with "mlc/".
    /// </summary>
    public interface IKeyValueStore
    {
        /// <summary>Store value under key, replacing any value.</summary>
        void Set(string key, byte[] value);
        /// <summary>
        /// Wait until key exists or timeout passes (Timeout.InfiniteTimeSpan: no
        /// limit; TimeSpan.Zero: only look). True with the value, false on timeout.
        /// </summary>
        bool TryGet(string key, TimeSpan timeout, out byte[] value);
    }

    /// <summary>An IKeyValueStore as mlc_store_t, for one init call.</summary>
    internal sealed class StoreCallbacks
    {
        private readonly IKeyValueStore _store;
        internal readonly MlcStoreSet SetFn;
        internal readonly MlcStoreGet GetFn;
        /// <summary>The first exception a callback caught (null: none).</summary>
        internal Exception Failure;
        internal string FailureWhere;

        internal StoreCallbacks(IKeyValueStore store)
        {
            _store = store;
            SetFn = Set;
            GetFn = Get;
        }

        internal MlcStore Native()
        {
            return new MlcStore
            {
                Ctx = IntPtr.Zero,
                Set = Marshal.GetFunctionPointerForDelegate(SetFn),
                Get = Marshal.GetFunctionPointerForDelegate(GetFn),
            };
        }

        private int Set(IntPtr ctx, IntPtr key, IntPtr value, UIntPtr len)
        {
            string k = null;
            try
            {
                k = Marshal.PtrToStringAnsi(key);
                var bytes = new byte[checked((int)(ulong)len)];
                if (bytes.Length > 0) Marshal.Copy(value, bytes, 0, bytes.Length);
                _store.Set(k, bytes);
                return Mlc.StoreOk;
            }
            catch (Exception e) { return Caught("Set", k, e); }
        }

        private int Get(IntPtr ctx, IntPtr key, IntPtr buf, UIntPtr cap, IntPtr len, double timeoutS)
        {
            string k = null;
            try
            {
                k = Marshal.PtrToStringAnsi(key);
                TimeSpan timeout = timeoutS < 0 ? System.Threading.Timeout.InfiniteTimeSpan : TimeSpan.FromSeconds(timeoutS);
                byte[] value;
                if (!_store.TryGet(k, timeout, out value)) return Mlc.StoreTimeout;
                if (value == null) throw new InvalidOperationException("TryGet returned true with a null value");
                int n = (int)Math.Min((ulong)value.Length, (ulong)cap);
                if (n > 0) Marshal.Copy(value, 0, buf, n);
                Marshal.WriteInt64(len, value.Length);
                return Mlc.StoreOk;
            }
            catch (Exception e) { return Caught("TryGet", k, e); }
        }

        private int Caught(string method, string key, Exception e)
        {
            if (Failure == null)
            {
                Failure = e;
                FailureWhere = _store.GetType().Name + "." + method + "(\"" + key + "\") threw " + e.GetType().Name + ": " + e.Message;
            }
            return Mlc.StoreFailed;
        }
    }
}
