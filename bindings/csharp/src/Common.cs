// SPDX-License-Identifier: BSD-3-Clause
// Types shared by the communicator and backend layers.
using System;
using System.Threading.Tasks;

namespace MLFramework.Communication
{
    /// <summary>Reduction operations of the backends (mlcomm's sum, prod, max, min, avg).</summary>
    public enum ReduceOp { Sum, Product, Max, Min, Avg }

    /// <summary>Where a communicator's buffers may live besides host memory (mlc_memory_kind_t).</summary>
    public enum MemoryKind { Host = 0, Cuda = 1, Rocm = 2 }

    /// <summary>What a probe found: the sender, the tag and the message's size.</summary>
    public struct MessageInfo
    {
        public int SourceRank { get; private set; }
        public int Tag { get; private set; }
        public long ByteCount { get; private set; }
        public MessageInfo(int sourceRank, int tag, long byteCount) : this()
        {
            SourceRank = sourceRank; Tag = tag; ByteCount = byteCount;
        }
        /// <summary>Elements of T in the message.</summary>
        public long Count<T>() where T : struct { return ByteCount / System.Runtime.InteropServices.Marshal.SizeOf(typeof(T)); }
        public override string ToString() { return "message from rank " + SourceRank + ", tag " + Tag + ", " + ByteCount + " bytes"; }
    }

    /// <summary>An operation in flight (completes when mlcomm completes it).</summary>
    public interface ICommunicationHandle
    {
        bool IsCompleted { get; }
        /// <summary>Wait for completion; throws the operation's CommunicationException.</summary>
        void Wait();
        /// <summary>Wait at most `timeout`; false if still in flight.</summary>
        bool TryWait(TimeSpan timeout);
        Task AsTask();
        /// <summary>The result tensor (null for operations without one); waits first.</summary>
        Tensor GetResult();
    }

    /// <summary>Handle over the Task of a pump operation.</summary>
    public class AsyncCommunicationHandle : ICommunicationHandle
    {
        private readonly Task _task;
        public AsyncCommunicationHandle(Task task)
        {
            if (task == null) throw new ArgumentNullException("task");
            _task = task;
        }
        public bool IsCompleted { get { return _task.IsCompleted; } }
        public void Wait() { Group.CheckNotHeld(_task); _task.GetAwaiter().GetResult(); }
        public bool TryWait(TimeSpan timeout)
        {
            Group.CheckNotHeld(_task);
            try { return _task.Wait(timeout); }
            catch (AggregateException e) { throw e.InnerException; }
        }
        public Task AsTask() { return _task; }
        public Tensor GetResult()
        {
            Wait();
            var t = _task as Task<Tensor>;
            return t != null ? t.Result : null;
        }
    }
}
