// SPDX-License-Identifier: BSD-3-Clause
// Operations on a communicator, as pump submissions: each pins its tensors
// (storage Acquire) when submitted, builds mlc_tensor_t descriptors in
// unmanaged memory, starts the mlcomm call on the pump thread and releases
// everything when the request completes.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading.Tasks;
using MLFramework.Communication.Native;

namespace MLFramework.Communication
{
    /// <summary>Descriptors and pins held while an operation is in flight.</summary>
    internal sealed class Pins
    {
        private readonly List<ITensorStorage> _held = new List<ITensorStorage>();
        private readonly List<IntPtr> _mem = new List<IntPtr>();

        internal unsafe IntPtr Desc(Tensor t)
        {
            IntPtr data = t.Storage.Acquire();
            _held.Add(t.Storage);
            IntPtr p = Marshal.AllocHGlobal(sizeof(MlcTensor));
            _mem.Add(p);
            var d = (MlcTensor*)p;
            *d = default(MlcTensor);
            d->Data = data;
            d->DType = (int)t.DType;
            d->NDim = t.Shape.Rank;
            for (int i = 0; i < t.Shape.Rank; i++) d->Shape[i] = (ulong)t.Shape[i];
            d->Device = t.Device == DeviceType.CPU ? Mlc.DeviceHost : t.DeviceIndex;
            return p;
        }

        internal IntPtr Data(Tensor t)
        {
            IntPtr data = t.Storage.Acquire();
            _held.Add(t.Storage);
            return data;
        }

        internal IntPtr Alloc(int bytes)
        {
            IntPtr p = Marshal.AllocHGlobal(bytes);
            _mem.Add(p);
            return p;
        }

        internal void Release()
        {
            foreach (var s in _held) s.Release();
            _held.Clear();
            foreach (var p in _mem) Marshal.FreeHGlobal(p);
            _mem.Clear();
        }
    }

    /// <summary>The binding's operations on one mlcomm communicator (all through its pump).</summary>
    internal static class Ops
    {
        internal static int OpCode(ReduceOp op)
        {
            switch (op)
            {
                case ReduceOp.Sum: return 0;
                case ReduceOp.Product: return 1;
                case ReduceOp.Max: return 2;
                case ReduceOp.Min: return 3;
                case ReduceOp.Avg: return 4;
            }
            throw new ArgumentException("unknown reduce operation " + (int)op);
        }

        internal delegate int Starter(IntPtr comm, out IntPtr req);

        internal static Task<T> Tensor<T>(CommEngine e, Pins pins, Starter start, Func<T> result)
        {
            return Submit(e, pins, start, true, result);
        }

        internal static Task<T> Buffer<T>(CommEngine e, Pins pins, Starter start, Func<T> result)
        {
            return Submit(e, pins, start, false, result);
        }

        private static Task<T> Submit<T>(CommEngine e, Pins pins, Starter start, bool tensorRequest, Func<T> result)
        {
            Func<IntPtr, PumpOp, int> begin = (comm, op) =>
            {
                op.ReqKind = tensorRequest ? PumpOp.Kind.TensorRequest : PumpOp.Kind.Request;
                IntPtr req;
                int st = start(comm, out req);
                op.Req = req;
                return st;
            };
            if (!Group.IsOpen) return e.Submit<T>(begin, result, pins.Release);
            if (tensorRequest)
            {
                pins.Release();
                throw NotInGroup("the tensor-layer operations (AllReduce, AllGather, ReduceScatter, Broadcast, Barrier)");
            }
            // Held back, pins and all, until the outermost Group.End.
            var held = new PumpOp<T>(begin, result, pins.Release);
            Group.Add(e, held, held.Tcs.Task);
            return held.Tcs.Task;
        }

        /// <summary>mlcomm_tensor.h's calls "are not meant for an open group"; neither is a probe-sized receive.</summary>
        private static InvalidOperationException NotInGroup(string what)
        {
            return new InvalidOperationException(what + " cannot be part of a group (Group.Start): " +
                                                 "groups take Send, Receive with a template and Reduce; end the group first");
        }

        internal static int DimOf(Tensor t, int dim)
        {
            int n = t.Shape.Rank;
            int d = dim < 0 ? dim + n : dim;
            return d >= 0 && d < n ? d : -1;
        }

        internal static Task<Tensor> AllReduce(CommEngine e, Tensor t, Tensor output, ReduceOp op)
        {
            if (t == null) throw new ArgumentNullException("tensor");
            int code = OpCode(op);
            Tensor outT = output ?? t.NewLike(t.Shape.ToArray());
            var pins = new Pins();
            IntPtr a = pins.Desc(t), b = pins.Desc(outT);
            return Tensor<Tensor>(e, pins, (IntPtr c, out IntPtr r) => Mlc.mlc_tensor_allreduce(a, b, code, c, out r), () => outT);
        }

        internal static Task<Tensor> AllGather(CommEngine e, Tensor t, Tensor output, int dim)
        {
            if (t == null) throw new ArgumentNullException("tensor");
            Tensor outT = output;
            if (outT == null)
            {
                // Equal shards: the output is WorldSize shards long along dim. Ranks
                // whose shards differ pass an output tensor; the library checks
                // the shapes across ranks either way. A dim out of range is left
                // to the library, which fails it on every rank with the reason.
                long[] shape = t.Shape.ToArray();
                int d = DimOf(t, dim);
                if (d >= 0) shape[d] = checked(shape[d] * e.Size);
                outT = t.NewLike(shape);
            }
            var pins = new Pins();
            IntPtr a = pins.Desc(t), b = pins.Desc(outT);
            return Tensor<Tensor>(e, pins, (IntPtr c, out IntPtr r) => Mlc.mlc_tensor_allgather(a, b, dim, c, out r), () => outT);
        }

        internal static Task<Tensor> ReduceScatter(CommEngine e, Tensor t, Tensor output, ReduceOp op, int dim)
        {
            if (t == null) throw new ArgumentNullException("tensor");
            int code = OpCode(op);
            Tensor outT = output;
            if (outT == null)
            {
                long[] shape = t.Shape.ToArray();
                int d = DimOf(t, dim);
                if (d >= 0)
                {
                    UIntPtr off, len;
                    CommunicationException.Check(Mlc.mlc_tensor_split((UIntPtr)(ulong)shape[d], e.Size, e.Rank, out off, out len));
                    shape[d] = (long)(ulong)len;
                }
                outT = t.NewLike(shape);
            }
            var pins = new Pins();
            IntPtr a = pins.Desc(t), b = pins.Desc(outT);
            return Tensor<Tensor>(e, pins, (IntPtr c, out IntPtr r) => Mlc.mlc_tensor_reduce_scatter(a, b, dim, code, c, out r), () => outT);
        }

        internal static Task<Tensor> Broadcast(CommEngine e, Tensor t, int root)
        {
            if (t == null) throw new ArgumentNullException("tensor");
            var pins = new Pins();
            IntPtr a = pins.Desc(t);
            return Tensor<Tensor>(e, pins, (IntPtr c, out IntPtr r) => Mlc.mlc_tensor_broadcast(a, root, c, out r), () => t);
        }

        internal static Task<bool> Barrier(CommEngine e)
        {
            var pins = new Pins();
            return Tensor<bool>(e, pins, (IntPtr c, out IntPtr r) => Mlc.mlc_tensor_barrier(c, out r), () => true);
        }

        /// <summary>Reduce to root: the root's task yields the result, the others' their input.</summary>
        internal static Task<Tensor> Reduce(CommEngine e, Tensor t, ReduceOp op, int root)
        {
            if (t == null) throw new ArgumentNullException("tensor");
            if (t.Device != DeviceType.CPU && e.Rank == root && t.Storage.AllocateLike(t.ByteSize) == null)
                throw new NotSupportedException("Reduce of a device tensor needs a storage that can allocate the result");
            int code = OpCode(op);
            Tensor outT = e.Rank == root ? t.NewLike(t.Shape.ToArray()) : null;
            var pins = new Pins();
            IntPtr a = pins.Data(t), b = outT != null ? pins.Data(outT) : IntPtr.Zero;
            var n = (UIntPtr)(ulong)t.NumElements;
            int dt = (int)t.DType;
            return Buffer<Tensor>(e, pins, (IntPtr c, out IntPtr r) => Mlc.mlc_reduce(a, b, n, dt, code, root, c, out r), () => outT ?? t);
        }

        internal static Task<bool> Send(CommEngine e, Tensor t, int dest, int tag)
        {
            if (t == null) throw new ArgumentNullException("tensor");
            var pins = new Pins();
            IntPtr a = pins.Data(t);
            var n = (UIntPtr)(ulong)t.NumElements;
            int dt = (int)t.DType;
            return Buffer<bool>(e, pins, (IntPtr c, out IntPtr r) => Mlc.mlc_send(a, n, dt, dest, tag, c, out r), () => true);
        }

        /// <summary>Receive into `into` (its shape is the message's; a longer message fails with MLC_ERR_TRUNCATE).</summary>
        internal static Task<Tensor> ReceiveInto(CommEngine e, Tensor into, int source, int tag)
        {
            var pins = new Pins();
            IntPtr a = pins.Data(into);
            var n = (UIntPtr)(ulong)into.NumElements;
            int dt = (int)into.DType;
            return Buffer<Tensor>(e, pins, (IntPtr c, out IntPtr r) => Mlc.mlc_recv(a, n, dt, source, tag, c, IntPtr.Zero, out r), () => into);
        }

        /// <summary>
        /// Receive a message of unknown length: the pump polls mlc_iprobe (so
        /// the operations submitted after it keep moving, and the communicator's
        /// timeout bounds the wait), then receives exactly the probed message.
        /// </summary>
        internal static Task<Tensor> Receive<T>(CommEngine e, int source, int tag) where T : struct
        {
            if (Group.IsOpen) throw NotInGroup("Receive without a template (its size comes from a probe)");
            DType dt = MLFramework.Tensor.DTypeOf(typeof(T));
            int es = MLFramework.Tensor.ElementSize(dt);
            Tensor<T> into = null;
            var pins = new Pins();
            return e.Submit<Tensor>((comm, op) =>
            {
                op.ReqKind = PumpOp.Kind.Polling;
                op.PollWhat = "Receive<" + typeof(T).Name + ">(source " + source + ", tag " + tag + ") on rank " + e.Rank;
                op.Poll = (c, o) =>
                {
                    MlcMsgStatus ms;
                    int flag;
                    int st = Mlc.mlc_iprobe(source, tag, c, out flag, out ms);
                    if (st != Mlc.Success || flag == 0) return st;
                    ulong bytes = (ulong)ms.Bytes;
                    if (bytes % (ulong)es != 0)
                        throw new CommunicationException(o.PollWhat + ": the message from rank " + ms.Source + " has " + bytes +
                                                         " bytes, not a whole number of " + es + "-byte elements");
                    into = MLFramework.Tensor<T>.Zeros((long)(bytes / (ulong)es));
                    IntPtr a = pins.Data(into);
                    IntPtr r;
                    st = Mlc.mlc_recv(a, (UIntPtr)(bytes / (ulong)es), (int)dt, ms.Source, ms.Tag, c, IntPtr.Zero, out r);
                    if (st == Mlc.Success) { o.Req = r; o.ReqKind = PumpOp.Kind.Request; }
                    return st;
                };
                return Mlc.Success;
            }, () => into, pins.Release);
        }

        internal static Task<MessageInfo?> Probe(CommEngine e, int source, int tag, bool block)
        {
            return e.Call<MessageInfo?>(comm =>
            {
                MlcMsgStatus ms;
                int flag = 1;
                int st = block ? Mlc.mlc_probe(source, tag, comm, out ms) : Mlc.mlc_iprobe(source, tag, comm, out flag, out ms);
                CommunicationException.Check(st);
                if (flag == 0) return null;
                return new MessageInfo(ms.Source, ms.Tag, (long)(ulong)ms.Bytes);
            });
        }
    }
}
