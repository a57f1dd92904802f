/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One declarative list per GPU runtime library: X(symbol, field, required).
 * Adding a function is one line here plus its field in MLC_GPURT_FIELDS.
 * Optional symbols leave the field NULL; callers test it before use.
 * REQ / OPT are defined by the file that expands a list.
 */
#ifndef MLC_DEVRT_GPURT_SYMS_H
#define MLC_DEVRT_GPURT_SYMS_H

#define MLC_CUDART_SYMBOLS(X)                                       \
    X(cudaGetErrorString, get_error_string, REQ)                    \
    X(cudaGetErrorName, get_error_name, REQ)                        \
    X(cudaGetLastError, get_last_error, REQ)                        \
    X(cudaDriverGetVersion, driver_get_version, REQ)                \
    X(cudaRuntimeGetVersion, runtime_get_version, REQ)              \
    X(cudaGetDeviceCount, get_device_count, REQ)                    \
    X(cudaGetDevice, get_device, REQ)                               \
    X(cudaSetDevice, set_device, REQ)                               \
    X(cudaGetDeviceProperties, get_device_properties, OPT)          \
    X(cudaDeviceGetAttribute, device_get_attribute, OPT)            \
    X(cudaDeviceGetPCIBusId, device_get_pci_bus_id, OPT)            \
    X(cudaDeviceCanAccessPeer, device_can_access_peer, OPT)         \
    X(cudaPointerGetAttributes, pointer_get_attributes, REQ)        \
    X(cudaMalloc, malloc, REQ)                                      \
    X(cudaFree, free, REQ)                                          \
    X(cudaMemcpyAsync, memcpy_async, REQ)                           \
    X(cudaMemcpy2DAsync, memcpy_2d_async, OPT)                      \
    X(cudaMemsetAsync, memset_async, OPT)                           \
    X(cudaStreamCreateWithFlags, stream_create_with_flags, REQ)     \
    X(cudaStreamDestroy, stream_destroy, REQ)                       \
    X(cudaStreamSynchronize, stream_synchronize, REQ)               \
    X(cudaStreamWaitEvent, stream_wait_event, REQ)                  \
    X(cudaEventCreateWithFlags, event_create_with_flags, REQ)       \
    X(cudaEventRecord, event_record, REQ)                           \
    X(cudaEventQuery, event_query, REQ)                             \
    X(cudaEventSynchronize, event_synchronize, REQ)                 \
    X(cudaEventDestroy, event_destroy, REQ)                         \
    X(cudaHostAlloc, host_alloc, REQ)                               \
    X(cudaFreeHost, free_host, REQ)                                 \
    X(cudaHostRegister, host_register, REQ)                         \
    X(cudaHostUnregister, host_unregister, REQ)                     \
    X(cudaIpcGetMemHandle, ipc_get_mem_handle, OPT)                 \
    X(cudaIpcOpenMemHandle, ipc_open_mem_handle, OPT)               \
    X(cudaIpcCloseMemHandle, ipc_close_mem_handle, OPT)

/* HIP 6 exports the CUDA-compatible properties layout as ...R0600; the
 * plain symbol keeps the HIP 5 layout (field *_legacy). */
#define MLC_HIPRT_SYMBOLS(X)                                        \
    X(hipGetErrorString, get_error_string, REQ)                     \
    X(hipGetErrorName, get_error_name, REQ)                         \
    X(hipGetLastError, get_last_error, REQ)                         \
    X(hipDriverGetVersion, driver_get_version, REQ)                 \
    X(hipRuntimeGetVersion, runtime_get_version, REQ)               \
    X(hipGetDeviceCount, get_device_count, REQ)                     \
    X(hipGetDevice, get_device, REQ)                                \
    X(hipSetDevice, set_device, REQ)                                \
    X(hipGetDevicePropertiesR0600, get_device_properties, OPT)      \
    X(hipGetDeviceProperties, get_device_properties_legacy, OPT)    \
    X(hipDeviceGetPCIBusId, device_get_pci_bus_id, OPT)             \
    X(hipDeviceCanAccessPeer, device_can_access_peer, OPT)          \
    X(hipPointerGetAttributes, pointer_get_attributes, REQ)         \
    X(hipMalloc, malloc, REQ)                                       \
    X(hipFree, free, REQ)                                           \
    X(hipMemcpyAsync, memcpy_async, REQ)                            \
    X(hipMemcpy2DAsync, memcpy_2d_async, OPT)                       \
    X(hipMemsetAsync, memset_async, OPT)                            \
    X(hipStreamCreateWithFlags, stream_create_with_flags, REQ)      \
    X(hipStreamDestroy, stream_destroy, REQ)                        \
    X(hipStreamSynchronize, stream_synchronize, REQ)                \
    X(hipStreamWaitEvent, stream_wait_event, REQ)                   \
    X(hipEventCreateWithFlags, event_create_with_flags, REQ)        \
    X(hipEventRecord, event_record, REQ)                            \
    X(hipEventQuery, event_query, REQ)                              \
    X(hipEventSynchronize, event_synchronize, REQ)                  \
    X(hipEventDestroy, event_destroy, REQ)                          \
    X(hipHostMalloc, host_alloc, REQ)                               \
    X(hipHostFree, free_host, REQ)                                  \
    X(hipHostRegister, host_register, REQ)                          \
    X(hipHostUnregister, host_unregister, REQ)                      \
    X(hipIpcGetMemHandle, ipc_get_mem_handle, OPT)                  \
    X(hipIpcOpenMemHandle, ipc_open_mem_handle, OPT)                \
    X(hipIpcCloseMemHandle, ipc_close_mem_handle, OPT)
#endif
