# mlprof.torch's native path (python/mlprof/_torch_native.cpp): built as
# libmlprof_torch.so where PyTorch's C++ headers are found (Debian's
# libtorch-dev beside python3-torch), through the interpreter that has torch.
# MLPROF_TORCH_NATIVE: AUTO (build when found), ON (required), OFF.
# Not in the sanitizer builds: python3 has no sanitizer runtime to load it.
set(MLPROF_TORCH_NATIVE AUTO CACHE STRING "Build mlprof.torch's native extension: AUTO, ON or OFF")
set(MLPROF_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch, for the tests against its profiler")

set(MLPROF_HAVE_TORCH_NATIVE OFF)
if(NOT MLPROF_TORCH_NATIVE STREQUAL "OFF" AND NOT MLPROF_SANITIZE)
  execute_process(
    COMMAND ${MLPROF_TORCH_PYTHON} -c
      "import torch, torch.utils.cpp_extension as c; print('mlprof:' + '|'.join([torch.__version__, str(int(torch._C._GLIBCXX_USE_CXX11_ABI)), ','.join(c.library_paths())] + c.include_paths()))"
    OUTPUT_VARIABLE _tn_out ERROR_VARIABLE _tn_err RESULT_VARIABLE _tn_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(_tn_why "")
  # one line "mlprof:VERSION|ABI|LIBDIRS|INCLUDE|INCLUDE..." (torch may print warnings beside it)
  if(NOT _tn_rc EQUAL 0 OR NOT _tn_out MATCHES "mlprof:([^\n]*)")
    set(_tn_why "${MLPROF_TORCH_PYTHON} has no torch")
  else()
    string(REPLACE "|" ";" _tn_lines "${CMAKE_MATCH_1}")
    list(GET _tn_lines 0 _tn_version)
    list(GET _tn_lines 1 _tn_abi)
    list(GET _tn_lines 2 _tn_lib)
    string(REPLACE "," ";" _tn_lib "${_tn_lib}")
    list(SUBLIST _tn_lines 3 -1 _tn_inc)
    find_path(MLPROF_TORCH_RECORD_FUNCTION_H ATen/record_function.h PATHS ${_tn_inc} NO_DEFAULT_PATH)
    if(NOT MLPROF_TORCH_RECORD_FUNCTION_H)
      set(_tn_why "no ATen/record_function.h under ${_tn_inc} (Debian: apt-get install libtorch-dev)")
    endif()
  endif()
  if(_tn_why STREQUAL "")
    enable_language(CXX)
    add_library(mlprof_torch SHARED python/mlprof/_torch_native.cpp)
    # -O2 in every build type: one translation unit that takes most of its time in torch's headers
    target_compile_options(mlprof_torch PRIVATE -O2 -Wall -Wextra -Werror)
    target_compile_definitions(mlprof_torch PRIVATE _GLIBCXX_USE_CXX11_ABI=${_tn_abi})
    target_include_directories(mlprof_torch SYSTEM PRIVATE ${_tn_inc})
    set_target_properties(mlprof_torch PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
      CXX_VISIBILITY_PRESET hidden BUILD_RPATH "${_tn_lib}")
    find_library(MLPROF_TORCH_CPU_LIB torch_cpu PATHS ${_tn_lib} NO_DEFAULT_PATH)
    find_library(MLPROF_C10_LIB c10 PATHS ${_tn_lib} NO_DEFAULT_PATH)
    target_link_libraries(mlprof_torch PRIVATE ${MLPROF_TORCH_CPU_LIB} ${MLPROF_C10_LIB})
    # A torch built with CUDA: the caching allocator's segments too (its trace
    # tracker; torch 2.6 on, lazyInitDevice's; checked on 2.11), with CUDA's
    # headers and libc10_cuda
    set(_tn_segments "no CUDA in this torch")
    execute_process(
      COMMAND ${MLPROF_TORCH_PYTHON} -c
        "import torch, torch.utils.cpp_extension as c\nif torch.version.cuda:\n  try:\n    try: p = c.include_paths(device_type='cuda')\n    except TypeError: p = c.include_paths(cuda=True)\n  except Exception as e: print('mlprof-no-cuda-headers:' + str(e).replace(chr(10), ' '))\n  else: print('mlprof:' + '|'.join(p))"
      OUTPUT_VARIABLE _tn_cuda_out ERROR_QUIET RESULT_VARIABLE _tn_cuda_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_tn_cuda_out MATCHES "mlprof-no-cuda-headers:([^\n]*)")
      set(_tn_segments "no CUDA headers for torch's CUDA (${CMAKE_MATCH_1}): segments not followed")
    elseif(_tn_cuda_rc EQUAL 0 AND _tn_cuda_out MATCHES "mlprof:([^\n]*)" AND _tn_version VERSION_GREATER_EQUAL 2.6)
      string(REPLACE "|" ";" _tn_cuda_inc "${CMAKE_MATCH_1}")
      find_path(MLPROF_TORCH_CCA_H c10/cuda/CUDACachingAllocator.h PATHS ${_tn_cuda_inc} NO_DEFAULT_PATH)
      find_path(MLPROF_TORCH_CUDART_H cuda_runtime_api.h PATHS ${_tn_cuda_inc} /usr/local/cuda/include NO_DEFAULT_PATH)
      find_library(MLPROF_C10_CUDA_LIB c10_cuda PATHS ${_tn_lib} NO_DEFAULT_PATH)
      if(MLPROF_TORCH_CCA_H AND MLPROF_TORCH_CUDART_H AND MLPROF_C10_CUDA_LIB)
        target_compile_definitions(mlprof_torch PRIVATE MLPROF_TORCH_CUDA=1)
        target_include_directories(mlprof_torch SYSTEM PRIVATE ${_tn_cuda_inc} ${MLPROF_TORCH_CUDART_H})
        target_link_libraries(mlprof_torch PRIVATE ${MLPROF_C10_CUDA_LIB})
        set(_tn_segments "the CUDA allocator's segments followed")
      else()
        set(_tn_segments "no c10/cuda/CUDACachingAllocator.h, cuda_runtime_api.h or libc10_cuda: segments not followed")
      endif()
    elseif(_tn_cuda_rc EQUAL 0 AND _tn_cuda_out MATCHES "mlprof:")
      set(_tn_segments "torch before 2.6: segments not followed")
    endif()
    set(MLPROF_HAVE_TORCH_NATIVE ON)
    message(STATUS "mlprof.torch native extension: torch ${_tn_version} (libmlprof_torch.so; ${_tn_segments})")
  elseif(MLPROF_TORCH_NATIVE STREQUAL "ON")
    message(FATAL_ERROR "MLPROF_TORCH_NATIVE=ON: ${_tn_why}")
  else()
    message(STATUS "mlprof.torch native extension: not built (${_tn_why}); mlprof.torch uses its dispatch mode")
  endif()
elseif(MLPROF_SANITIZE)
  message(STATUS "mlprof.torch native extension: not in sanitizer builds (python3 has no sanitizer runtime)")
endif()
