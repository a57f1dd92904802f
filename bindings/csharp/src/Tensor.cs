// SPDX-License-Identifier: BSD-3-Clause
// A minimal dense tensor for the binding: row-major, contiguous, over a
// managed array (pinned only while an operation uses it), native memory or
// device memory, or any storage a framework plugs in through ITensorStorage.
using System;
using System.Runtime.InteropServices;
using System.Threading;

namespace MLFramework
{
    /// <summary>Element types, numbered as mlcomm's mlc_dtype_t.</summary>
    public enum DType
    {
        Int8 = 0, UInt8 = 1, Int32 = 2, UInt32 = 3, Int64 = 4, UInt64 = 5,
        Float16 = 6, BFloat16 = 7, Float32 = 8, Float64 = 9
    }

    /// <summary>Where a tensor's memory lives.</summary>
    public enum DeviceType { CPU, CUDA, ROCm }

    /// <summary>The shape of a tensor.</summary>
    public sealed class TensorShape
    {
        private readonly long[] _dims;
        public TensorShape(params long[] dims)
        {
            if (dims == null) throw new ArgumentNullException("dims");
            if (dims.Length > 8) throw new ArgumentException("a tensor has at most 8 dimensions, got " + dims.Length);
            foreach (long d in dims)
                if (d < 0) throw new ArgumentException("negative dimension " + d + " in shape [" + string.Join(", ", dims) + "]");
            _dims = (long[])dims.Clone();
        }
        public int Rank { get { return _dims.Length; } }
        public long this[int i] { get { return _dims[i]; } }
        public long TotalSize
        {
            get { long n = 1; foreach (long d in _dims) n = checked(n * d); return n; }
        }
        public long[] ToArray() { return (long[])_dims.Clone(); }
        public override string ToString() { return "[" + string.Join(", ", _dims) + "]"; }
        public override bool Equals(object o)
        {
            var s = o as TensorShape;
            if (s == null || s._dims.Length != _dims.Length) return false;
            for (int i = 0; i < _dims.Length; i++) if (s._dims[i] != _dims[i]) return false;
            return true;
        }
        public override int GetHashCode() { long h = 17; foreach (long d in _dims) h = h * 31 + d; return h.GetHashCode(); }
    }

    /// <summary>
    /// Where a tensor's elements are. A framework implements this over its own
    /// tensor memory so the binding uses it in place (no copies). Acquire
    /// returns the address of the first element and keeps it fixed until the
    /// matching Release; calls may nest (several operations in flight).
    /// </summary>
    public interface ITensorStorage
    {
        DeviceType Device { get; }
        /// <summary>GPU ordinal; -1 for host memory.</summary>
        int DeviceIndex { get; }
        /// <summary>Bytes available from the address Acquire returns.</summary>
        long ByteLength { get; }
        IntPtr Acquire();
        void Release();
        /// <summary>
        /// A new storage of the same kind for `bytes` bytes (results of
        /// collectives), or null when this storage cannot allocate.
        /// </summary>
        ITensorStorage AllocateLike(long bytes);
        /// <summary>The managed array behind the storage, or null.</summary>
        Array ManagedArray { get; }
    }

    /// <summary>Storage over a managed array, pinned with a GCHandle while acquired.</summary>
    public sealed class ManagedStorage : ITensorStorage
    {
        private static int _livePins;
        /// <summary>GCHandles the binding holds pinned right now (0 when nothing is in flight).</summary>
        public static int LivePins { get { return Volatile.Read(ref _livePins); } }

        private readonly Array _array;
        private readonly object _lock = new object();
        private GCHandle _handle;
        private int _count;

        public ManagedStorage(Array array)
        {
            if (array == null) throw new ArgumentNullException("array");
            _array = array;
        }
        public DeviceType Device { get { return DeviceType.CPU; } }
        public int DeviceIndex { get { return -1; } }
        public long ByteLength { get { return (long)_array.Length * Marshal.SizeOf(_array.GetType().GetElementType()); } }
        public Array ManagedArray { get { return _array; } }
        public IntPtr Acquire()
        {
            lock (_lock)
            {
                if (_count++ == 0)
                {
                    _handle = GCHandle.Alloc(_array, GCHandleType.Pinned);
                    Interlocked.Increment(ref _livePins);
                }
                return _handle.AddrOfPinnedObject();
            }
        }
        public void Release()
        {
            lock (_lock)
            {
                if (_count == 0) throw new InvalidOperationException("ManagedStorage.Release without Acquire");
                if (--_count == 0)
                {
                    _handle.Free();
                    Interlocked.Decrement(ref _livePins);
                }
            }
        }
        public ITensorStorage AllocateLike(long bytes)
        {
            Type t = _array.GetType().GetElementType();
            long n = bytes / Marshal.SizeOf(t);
            return new ManagedStorage(Array.CreateInstance(t, n));
        }
    }

    /// <summary>Storage over memory the caller owns (host or device); never freed by the binding.</summary>
    public sealed class NativeStorage : ITensorStorage
    {
        private readonly IntPtr _ptr;
        private readonly long _bytes;
        private readonly DeviceType _device;
        private readonly int _index;
        public NativeStorage(IntPtr ptr, long bytes, DeviceType device, int deviceIndex)
        {
            if (ptr == IntPtr.Zero && bytes > 0) throw new ArgumentException("native tensor memory is NULL");
            if (device == DeviceType.CPU && deviceIndex != -1) throw new ArgumentException("host memory has device index -1, got " + deviceIndex);
            if (device != DeviceType.CPU && deviceIndex < 0) throw new ArgumentException("device memory needs a GPU ordinal >= 0, got " + deviceIndex);
            _ptr = ptr; _bytes = bytes; _device = device; _index = deviceIndex;
        }
        public DeviceType Device { get { return _device; } }
        public int DeviceIndex { get { return _index; } }
        public long ByteLength { get { return _bytes; } }
        public Array ManagedArray { get { return null; } }
        public IntPtr Acquire() { return _ptr; }
        public void Release() { }
        /// <summary>Host results of a native host tensor go to a managed byte array; device memory cannot be allocated here.</summary>
        public ITensorStorage AllocateLike(long bytes)
        {
            return _device == DeviceType.CPU ? new ManagedStorage(new byte[bytes]) : null;
        }
    }

    /// <summary>A dense, contiguous, row-major tensor.</summary>
    public class Tensor
    {
        private readonly ITensorStorage _storage;
        private readonly TensorShape _shape;
        private readonly DType _dtype;

        /// <summary>A tensor over storage (managed, native, device or the framework's own).</summary>
        public Tensor(ITensorStorage storage, DType dtype, params long[] shape)
        {
            if (storage == null) throw new ArgumentNullException("storage");
            _storage = storage;
            _dtype = dtype;
            _shape = new TensorShape(shape);
            long need = checked(_shape.TotalSize * ElementSize(dtype));
            if (storage.ByteLength < need)
                throw new ArgumentException("tensor of shape " + _shape + " " + dtype + " needs " + need + " bytes, its storage has " + storage.ByteLength);
        }

        /// <summary>A tensor over native host memory or device memory the caller owns.</summary>
        public Tensor(IntPtr data, DType dtype, long[] shape, DeviceType device = DeviceType.CPU, int deviceIndex = -1)
            : this(new NativeStorage(data, checked(new TensorShape(shape).TotalSize * ElementSize(dtype)), device,
                                     device == DeviceType.CPU ? -1 : Math.Max(0, deviceIndex)), dtype, shape)
        {
        }

        public TensorShape Shape { get { return _shape; } }
        public DType DType { get { return _dtype; } }
        public DeviceType Device { get { return _storage.Device; } }
        public int DeviceIndex { get { return _storage.DeviceIndex; } }
        public ITensorStorage Storage { get { return _storage; } }
        public long NumElements { get { return _shape.TotalSize; } }
        public long ByteSize { get { return _shape.TotalSize * ElementSize(_dtype); } }

        public static int ElementSize(DType t)
        {
            switch (t)
            {
                case DType.Int8: case DType.UInt8: return 1;
                case DType.Float16: case DType.BFloat16: return 2;
                case DType.Int32: case DType.UInt32: case DType.Float32: return 4;
                case DType.Int64: case DType.UInt64: case DType.Float64: return 8;
            }
            throw new ArgumentException("unknown dtype " + (int)t);
        }

        /// <summary>The dtype of a C# element type (ushort needs an explicit Float16 or BFloat16).</summary>
        public static DType DTypeOf(Type t)
        {
            if (t == typeof(float)) return DType.Float32;
            if (t == typeof(double)) return DType.Float64;
            if (t == typeof(int)) return DType.Int32;
            if (t == typeof(long)) return DType.Int64;
            if (t == typeof(uint)) return DType.UInt32;
            if (t == typeof(ulong)) return DType.UInt64;
            if (t == typeof(byte)) return DType.UInt8;
            if (t == typeof(sbyte)) return DType.Int8;
            throw new ArgumentException("no mlcomm dtype for element type " + t.Name +
                                        (t == typeof(ushort) ? " (16-bit floats: Tensor.From(ushort[], DType.Float16 or DType.BFloat16, shape))" : ""));
        }

        /// <summary>A tensor over `data` (no copy), shape defaulting to one dimension.</summary>
        public static Tensor<T> From<T>(T[] data, params long[] shape) where T : struct
        {
            if (data == null) throw new ArgumentNullException("data");
            return new Tensor<T>(data, DTypeOf(typeof(T)), shape == null || shape.Length == 0 ? new long[] { data.Length } : shape);
        }

        /// <summary>half / bfloat16 as raw 16-bit patterns.</summary>
        public static Tensor<ushort> From(ushort[] data, DType dtype, params long[] shape)
        {
            if (data == null) throw new ArgumentNullException("data");
            if (dtype != DType.Float16 && dtype != DType.BFloat16)
                throw new ArgumentException("ushort data is Float16 or BFloat16, not " + dtype);
            return new Tensor<ushort>(data, dtype, shape == null || shape.Length == 0 ? new long[] { data.Length } : shape);
        }

        /// <summary>A copy of the elements as T[] (T must have the element size of the dtype).</summary>
        public T[] ToArray<T>() where T : struct
        {
            if (Device != DeviceType.CPU) throw new InvalidOperationException("ToArray of a " + Device + " tensor: copy it to the host first");
            int es = Marshal.SizeOf(typeof(T));
            if (es != ElementSize(_dtype))
                throw new ArgumentException("ToArray<" + typeof(T).Name + ">: element size " + es + " differs from " + _dtype + "'s " + ElementSize(_dtype));
            long n = NumElements;
            var result = new T[n];
            var src = _storage.ManagedArray;
            if (src != null && src.GetType().GetElementType() == typeof(T))
            {
                Array.Copy(src, result, n);
                return result;
            }
            IntPtr p = _storage.Acquire();
            try
            {
                var h = GCHandle.Alloc(result, GCHandleType.Pinned);
                try { CopyBytes(p, h.AddrOfPinnedObject(), n * es); }
                finally { h.Free(); }
            }
            finally { _storage.Release(); }
            return result;
        }

        internal static unsafe void CopyBytes(IntPtr src, IntPtr dst, long bytes)
        {
            Buffer.MemoryCopy((void*)src, (void*)dst, bytes, bytes);
        }

        /// <summary>A new tensor of this tensor's kind (same element type and device) with another shape.</summary>
        public Tensor NewLike(params long[] shape)
        {
            long bytes = checked(new TensorShape(shape).TotalSize * ElementSize(_dtype));
            ITensorStorage s = _storage.AllocateLike(bytes);
            if (s == null)
                throw new NotSupportedException("cannot allocate a result for a " + Device + " tensor: its storage has no allocator (pass an output tensor, or implement ITensorStorage.AllocateLike)");
            return Wrap(s, _dtype, shape);
        }

        internal static Tensor Wrap(ITensorStorage s, DType dtype, long[] shape)
        {
            Array a = s.ManagedArray;
            if (a == null) return new Tensor(s, dtype, shape);
            Type t = a.GetType().GetElementType();
            Type gen = typeof(Tensor<>).MakeGenericType(t);
            return (Tensor)Activator.CreateInstance(gen, System.Reflection.BindingFlags.Instance | System.Reflection.BindingFlags.NonPublic | System.Reflection.BindingFlags.Public,
                                                    null, new object[] { s, dtype, shape }, null);
        }

        public override string ToString() { return "Tensor(" + _dtype + ", " + _shape + ", " + Device + ")"; }
    }

    /// <summary>A tensor over a managed T[] (float, double, int, long, ... ; ushort for 16-bit floats).</summary>
    public class Tensor<T> : Tensor where T : struct
    {
        internal Tensor(T[] data, DType dtype, long[] shape) : base(new ManagedStorage(data), dtype, shape) { }
        public Tensor(ITensorStorage storage, DType dtype, long[] shape) : base(storage, dtype, shape) { }

        /// <summary>The managed elements (no copy), or null for native storage.</summary>
        public T[] Data { get { return Storage.ManagedArray as T[]; } }

        /// <summary>A new zero tensor of the given shape.</summary>
        public static Tensor<T> Zeros(params long[] shape)
        {
            var s = new TensorShape(shape);
            return new Tensor<T>(new T[s.TotalSize], DTypeOf(typeof(T)), shape);
        }
    }
}
